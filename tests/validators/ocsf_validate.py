"""Validates JSON Lines records against the published OCSF schema.

Each record is checked against the JSON Schema (draft 2020-12) that the
`ocsf-json-schema` package generates from the OCSF schema it ships, for the
class and version the record itself claims (`class_uid`,
`metadata.version`), with the `jsonschema` package. Nothing here knows how
chainship maps an event: the schema and the validator are independent of it.

Usage: python ocsf_validate.py FILE   (exit 0: every record valid; 1: not)
"""

import json
import sys

from jsonschema import Draft202012Validator
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

validators = {}


def validator_for(version, class_uid):
    key = (version, class_uid)
    if key not in validators:
        schema = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=version))
        class_schema = schema.get_class_schema(
            class_name=schema.lookup_class_name_from_uid(class_uid=class_uid), profiles=[]
        )
        Draft202012Validator.check_schema(class_schema)
        validators[key] = Draft202012Validator(
            class_schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
    return validators[key]


def main(path):
    bad = 0
    count = 0
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            count += 1
            record = json.loads(line)
            version = record.get("metadata", {}).get("version")
            errors = sorted(
                validator_for(version, record.get("class_uid")).iter_errors(record),
                key=lambda e: list(e.absolute_path),
            )
            for error in errors[:3]:
                where = "/".join(str(p) for p in error.absolute_path) or "(record)"
                print(f"line {number}: {where}: {error.message[:300]}")
            bad += bool(errors)
    print(f"ocsf: {count - bad} valid, {bad} invalid")
    return 0 if bad == 0 and count > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
