//! The integration test binary: golden render tests, field-report tests, architecture guard,
//! CLI tests, and the end-to-end tests on the testbed (`common::testbed`).

// Unit file names are case-sensitive: `.POD` is not a Quadlet file.
#![allow(clippy::case_sensitive_file_extension_comparisons)]
// Test scripts are built up with format!: readability over an allocation.
#![allow(clippy::format_push_string)]

mod architecture;
mod cli;
mod common;
mod e2e_agents;
mod e2e_app;
mod e2e_attacks_access_log_key;
mod e2e_attacks_image_build;
mod e2e_attacks_image_env_and_pool_service;
mod e2e_attacks_image_loader;
mod e2e_attacks_journal_and_setup_paths;
mod e2e_attacks_pool_credentials;
mod e2e_attacks_stream_and_watch;
mod e2e_bench;
mod e2e_boundary;
mod e2e_build;
mod e2e_capacity;
mod e2e_check;
mod e2e_credentials;
mod e2e_deb;
mod e2e_delivery;
mod e2e_delivery_faults;
mod e2e_docs;
mod e2e_drill;
mod e2e_faults;
mod e2e_faults_reexec;
mod e2e_faults_storage_lock_and_user_manager;
mod e2e_gate;
mod e2e_git_attacks;
mod e2e_gvisor;
mod e2e_handover;
mod e2e_kube;
mod e2e_kube_run;
mod e2e_leftovers;
mod e2e_logs;
mod e2e_metrics;
mod e2e_mounts;
mod e2e_pool;
mod e2e_pool_claim;
mod e2e_pool_cred;
mod e2e_pool_held;
mod e2e_pool_keep;
mod e2e_pool_services;
mod e2e_pool_upgrade;
mod e2e_presets;
mod e2e_probe;
mod e2e_project;
mod e2e_proven;
mod e2e_prune;
mod e2e_results;
mod e2e_run;
mod e2e_runs_svg;
mod e2e_schedule;
mod e2e_services;
mod e2e_setup;
mod e2e_soak;
mod e2e_start;
mod e2e_tunnel;
mod e2e_tunnel_attacks;
mod e2e_twin;
mod e2e_units;
mod e2e_watch;
mod field_reports;
mod golden;
mod kube_export;
mod kube_gate_export;
mod podman_adapter;
mod preset_wrappers;
mod testbed_selftest;
