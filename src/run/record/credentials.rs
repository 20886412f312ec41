//! What each credential carried in a run (issue 31): the requests the proxy forwarded with the
//! key, their body bytes, and the requests it refused over the run's budget, read from the
//! proxy's decisions (the access log's `lport` names the credential's port, `clen` the body
//! size) — never from anything the agent reports. Pure.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::render::proxy::credentials::port_of;
use crate::render::proxy::{DenyReason, REASON_CREDENTIAL};
use crate::spec::Credential;

/// One credential's use in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialUse {
    /// The credential's variable (`ANTHROPIC_API_KEY`); never its value.
    pub env: String,
    /// Its API host.
    pub host: String,
    /// The budget's most requests (`agent.credentials[].budget.requests`); `None`: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_requests: Option<u64>,
    /// The budget's most request body bytes; `None`: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_request_bytes: Option<u64>,
    /// Requests the proxy forwarded with the key.
    pub requests: u64,
    /// Their body bytes (`Content-Length`), in bytes.
    pub request_bytes: u64,
    /// Requests refused with 429 over the budget.
    pub refused_over_budget: u64,
    /// Of [`CredentialUse::requests`], those whose answer was the proxy's own 502/503/504:
    /// the API host was not reached (`record::summary::failed_upstream`).
    #[serde(default)]
    pub failed_upstream: u64,
}

impl CredentialUse {
    /// The summary's line: `credential ENV (HOST): N requests, B request bytes[; budget …]`.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = format!(
            "credential {} ({}): {} requests, {} request bytes",
            self.env, self.host, self.requests, self.request_bytes
        );
        if self.failed_upstream > 0 {
            let _ = write!(
                s,
                " ({} failed upstream: the API host was not reached)",
                self.failed_upstream
            );
        }
        let caps: Vec<String> = [
            self.budget_requests.map(|n| format!("{n} requests")),
            self.budget_request_bytes
                .map(|n| format!("{n} request bytes")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !caps.is_empty() {
            let _ = write!(
                s,
                "; budget {}: {} refused over it",
                caps.join(", "),
                self.refused_over_budget
            );
        }
        s
    }
}

/// Each credential's use, from the run's proxy `decisions` (as the record keeps them).
#[must_use]
pub fn usage(credentials: &[Credential], decisions: &[serde_json::Value]) -> Vec<CredentialUse> {
    let text = |d: &serde_json::Value, k: &str| {
        d.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    credentials
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let port = port_of(i).to_string();
            let mut u = CredentialUse {
                env: c.env.clone(),
                host: c.host.clone(),
                budget_requests: c.budget.and_then(|b| b.requests),
                budget_request_bytes: c.budget.and_then(|b| b.request_bytes),
                requests: 0,
                request_bytes: 0,
                refused_over_budget: 0,
                failed_upstream: 0,
            };
            for d in decisions.iter().filter(|d| text(d, "lport") == port) {
                let reason = text(d, "reason");
                if reason == REASON_CREDENTIAL {
                    u.requests = u.requests.saturating_add(1);
                    // The agent writes Content-Length: a huge one saturates, never wraps.
                    let clen = text(d, "clen").parse::<u64>().unwrap_or(0);
                    u.request_bytes = u.request_bytes.saturating_add(clen);
                    if super::summary::failed_upstream(&text(d, "status"), &text(d, "err")) {
                        u.failed_upstream = u.failed_upstream.saturating_add(1);
                    }
                } else if reason == DenyReason::CredentialBudget.as_str() {
                    u.refused_over_budget = u.refused_over_budget.saturating_add(1);
                }
            }
            u
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{CredentialBudget, CredentialScheme};

    fn cred(env: &str, budget: Option<CredentialBudget>) -> Credential {
        Credential {
            env: env.into(),
            host: "api.example".into(),
            header: "x-api-key".into(),
            scheme: CredentialScheme::Raw,
            paths: vec!["/v1/messages".into()],
            methods: vec!["POST".into()],
            port: 443,
            placeholder_prefix: String::new(),
            base_url_env: "X_BASE_URL".into(),
            base_url_path: String::new(),
            budget,
            line: 1,
        }
    }

    #[test]
    fn a_credential_request_the_api_host_never_got_is_counted_failed_upstream() {
        let d = |status: &str, err: &str| serde_json::json!({"lport": "3129", "reason": "credential_added", "clen": "10", "status": status, "err": err});
        let got = usage(
            &[cred("A_KEY", None)],
            &[d("502", "ERR_CONNECT_FAIL"), d("200", "-"), d("500", "-")],
        );
        assert_eq!((got[0].requests, got[0].failed_upstream), (3, 1));
        assert!(
            got[0].summary().contains(
                "3 requests, 30 request bytes (1 failed upstream: the API host was not reached)"
            ),
            "{}",
            got[0].summary()
        );
    }

    #[test]
    fn each_credential_counts_its_own_ports_forwarded_bytes_and_refusals() {
        let d = |lport: u16, reason: &str, clen: &str| serde_json::json!({"lport": lport.to_string(), "reason": reason, "clen": clen});
        let decisions = vec![
            d(3129, "credential_added", "100"),
            d(3129, "credential_added", "-"),
            d(3129, "credential_over_budget", "10"),
            d(3129, "credential_path_not_allowed", "5"),
            d(3130, "credential_added", "7"),
            d(3130, "credential_added", "18446744073709551615"),
            d(3128, "allowlisted", "1000"),
        ];
        let budget = CredentialBudget {
            requests: Some(2),
            request_bytes: None,
        };
        let got = usage(
            &[cred("A_KEY", Some(budget)), cred("B_KEY", None)],
            &decisions,
        );
        assert_eq!(
            (
                got[0].requests,
                got[0].request_bytes,
                got[0].refused_over_budget
            ),
            (2, 100, 1)
        );
        assert_eq!(got[0].budget_requests, Some(2));
        assert_eq!(
            (
                got[1].requests,
                got[1].request_bytes,
                got[1].refused_over_budget
            ),
            (2, u64::MAX, 0),
            "a huge Content-Length saturates, never wraps"
        );
        assert_eq!(
            got[0].summary(),
            "credential A_KEY (api.example): 2 requests, 100 request bytes; budget 2 requests: 1 refused over it"
        );
        assert_eq!(
            got[1].summary(),
            "credential B_KEY (api.example): 2 requests, 18446744073709551615 request bytes"
        );
    }
}
