//! The integration tests, built as one test binary (`autotests = false` in
//! Cargo.toml): one link of rdkafka and the AWS SDK instead of one per file.
//!
//! Each module is one area; `common` holds what they share, including the
//! lock every test that touches the real services takes (see
//! `common::services`): in one binary, tests of different modules run at the
//! same time.

#[macro_use]
mod common;

mod anchor_file;
mod anchor_s3;
mod chain_props;
mod cli_help;
mod config;
mod demo;
mod deploy;
mod deploy_podman;
mod deploy_run;
mod docs_and_config;
mod evidence_bundle;
mod examples;
mod field_round2;
mod fleet;
mod follow_file;
mod hardening_follow;
mod hardening_store;
mod hardening_verify;
mod kafka_fleet;
mod kafka_semantics;
mod monitor;
mod one_verdict;
mod operator_checks;
mod operator_paths;
mod ops;
mod package;
mod parallel_walk;
mod readonly_db;
mod record_formats;
mod redaction;
mod restore_diff;
mod run_evidence;
mod services_smoke;
mod signers;
mod sink_kafka;
mod sink_s3;
mod tlog;
mod verify_cli;
mod verify_export;
mod verify_state;
mod witness;
