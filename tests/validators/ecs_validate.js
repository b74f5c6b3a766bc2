// Validates JSON Lines records against Elastic's published ECS field
// definitions (the `@elastic/ecs` package's EcsFlat: every field's type,
// whether it may be an array, its allowed values and, for each
// event.category, the event.type values it expects).
//
// Every leaf of a record must be an ECS field (or a key under an ECS
// `object`/`flattened` field such as `labels`), of the field's type;
// categorization fields must hold allowed values, and each event.type must
// be one its event.category expects; ECS's required fields must be there.
// Nothing here knows how chainship maps an event.
//
// Usage: node ecs_validate.js ECS_PACKAGE_DIR FILE  (exit 0: all valid; 1: not)

const fs = require('fs');
const path = require('path');

const { EcsFlat } = require(path.join(path.resolve(process.argv[2]), 'build/commonjs/ecs_flat.js'));
const { EcsVersion } = require(path.join(path.resolve(process.argv[2]), 'build/commonjs/index.js'));

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function typeOk(type, value) {
  switch (type) {
    case 'keyword': case 'constant_keyword': case 'wildcard': case 'match_only_text': case 'text': case 'ip':
      return typeof value === 'string';
    case 'long': case 'integer': case 'short': case 'byte':
      return Number.isInteger(value);
    case 'float': case 'double': case 'scaled_float': case 'half_float':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'date':
      return typeof value === 'string' && ISO_DATE.test(value) && !Number.isNaN(Date.parse(value));
    default:
      return false;
  }
}

// Leaves of a document as [dotted path, value]; arrays stay values.
function leaves(doc, prefix, out) {
  for (const [key, value] of Object.entries(doc)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && !EcsFlat[name]) {
      leaves(value, name, out);
    } else {
      out.push([name, value]);
    }
  }
  return out;
}

// The field definition a path falls under: its own, or an object/flattened parent's.
function definition(name) {
  if (EcsFlat[name]) return { field: EcsFlat[name], name };
  const parts = name.split('.');
  for (let i = parts.length - 1; i > 0; i--) {
    const parent = parts.slice(0, i).join('.');
    const def = EcsFlat[parent];
    if (def && (def.type === 'object' || def.type === 'flattened')) {
      return { field: { type: def.object_type || 'keyword', normalize: [] }, name: parent };
    }
  }
  return null;
}

function problems(doc) {
  const found = [];
  for (const [name, value] of leaves(doc, '', [])) {
    const def = definition(name);
    if (!def) { found.push(`${name}: not an ECS field`); continue; }
    const field = def.field;
    if (field.type === 'object' || field.type === 'flattened') {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        found.push(`${name}: must be an object`);
      } else if (field.object_type) {
        for (const [key, v] of Object.entries(value)) {
          if (!typeOk(field.object_type, v)) found.push(`${name}.${key}: must be of type ${field.object_type}`);
        }
      }
      continue;
    }
    const values = Array.isArray(value) ? value : [value];
    if (Array.isArray(value) && !(field.normalize || []).includes('array')) {
      found.push(`${name}: an array where ECS expects one value`);
    }
    for (const v of values) {
      if (!typeOk(field.type, v)) found.push(`${name}: ${JSON.stringify(v)} is not of type ${field.type}`);
      if (field.allowed_values && !field.allowed_values.some((a) => a.name === v)) {
        found.push(`${name}: ${JSON.stringify(v)} is not an allowed value`);
      }
    }
  }
  for (const [name, field] of Object.entries(EcsFlat)) {
    const present = name.split('.').reduce((o, k) => (o == null ? undefined : o[k]), doc) !== undefined;
    if ((field.required || name === '@timestamp') && !present) found.push(`${name}: required`);
  }
  const categories = [].concat((doc.event || {}).category || []);
  const types = [].concat((doc.event || {}).type || []);
  for (const category of categories) {
    const allowed = EcsFlat['event.category'].allowed_values.find((a) => a.name === category);
    for (const type of types) {
      if (allowed && allowed.expected_event_types && !allowed.expected_event_types.includes(type)) {
        found.push(`event.type: ${type} is not expected with event.category ${category}`);
      }
    }
  }
  if (doc.ecs && doc.ecs.version !== EcsVersion) {
    found.push(`ecs.version: ${doc.ecs.version}, but these definitions are ECS ${EcsVersion}`);
  }
  return found;
}

let bad = 0;
let count = 0;
fs.readFileSync(process.argv[3], 'utf8').split('\n').forEach((line, i) => {
  if (!line.trim()) return;
  count += 1;
  const found = problems(JSON.parse(line));
  for (const p of found.slice(0, 3)) console.log(`line ${i + 1}: ${p}`);
  if (found.length) bad += 1;
});
console.log(`ecs: ${count - bad} valid, ${bad} invalid`);
process.exit(bad === 0 && count > 0 ? 0 : 1);
