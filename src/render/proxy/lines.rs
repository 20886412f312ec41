//! `squid.conf` lines that both the forward port's rules ([`super::squid`]) and the credential
//! ports' ([`super::credentials`]) write. Pure.

use std::fmt::Write as _;

use super::DenyReason;

/// The `annotate_transaction` ACL of each reason (`acl r_x annotate_transaction reason=x`),
/// then `allow_acl` for the allowing reason `allow_reason`.
pub(super) fn annotate_acls(
    out: &mut String,
    reasons: &[DenyReason],
    allow_acl: &str,
    allow_reason: &str,
) {
    for reason in reasons {
        let _ = writeln!(
            out,
            "acl {} annotate_transaction reason={}",
            reason.acl(),
            reason.as_str()
        );
    }
    let _ = writeln!(
        out,
        "acl {allow_acl} annotate_transaction reason={allow_reason}"
    );
}

/// One `http_access` rule: `deny`/`allow` plus its ACL conditions, written in order.
pub(super) fn access(out: &mut String, action: &str, conds: &[&str]) {
    let _ = writeln!(out, "http_access {action} {}", conds.join(" "));
}
