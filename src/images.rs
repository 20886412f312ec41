//! Image references cyclix builds and uses itself.

pub mod agents;
pub mod build;

/// The egress proxy image built from `images/proxy/Containerfile` by `cyclix images build`.
pub const PROXY_IMAGE: &str = "localhost/cyclix-proxy:latest";
/// The Python agent image built from `Containerfile.python`.
pub const AGENT_PYTHON_IMAGE: &str = "localhost/cyclix-agent-python:latest";
/// The `PostgreSQL` service image built from `images/postgres/Containerfile`: a tenant's
/// `services:` entry with `data: /var/lib/postgresql/data` and a `pg_isready` health check.
pub const POSTGRES_IMAGE: &str = "localhost/cyclix-postgres:latest";
/// The git image built from `images/git/Containerfile`: the hardened container that writes a
/// run's bundle and uncommitted diff (`run::import`).
pub const GIT_IMAGE: &str = "localhost/cyclix-git:latest";
