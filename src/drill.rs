//! The escape drill (issue 14 item 3): `cyclix drill TENANT` runs the tenant once per escape,
//! each run's task replaced by a prompt that asks the agent to do exactly that one thing, and
//! judges each escape from the HOST (its tripwires, the sentinel, the repository's hashes, the
//! proxy's decisions), never from the model's words. Pure: the escape table and the prompts
//! ([`escapes`]), the verdict over collected evidence ([`verdict`]); planting, running and
//! reading the host is `app::drill_cmd`.

pub mod escapes;
pub mod verdict;

pub use escapes::{Escape, Targets};
pub use verdict::{Observed, Verdict};

/// The word every drill object's name and every drill command carries: `drill-NONCE`.
#[must_use]
pub fn tag(nonce: &str) -> String {
    format!("drill-{nonce}")
}

/// The nonce of a drill object's file name (`cyclix-drill-NONCE`, `cyclix-drill-NONCE-outside`,
/// `cyclix-drill-NONCE.sock`, `cyclix-drill-NONCE.json`); `None` for any other name. Pure.
#[must_use]
pub fn nonce_of_file(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("cyclix-drill-")?;
    let end = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(rest.len());
    (end >= 8).then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drill_files_name_their_nonce() {
        assert_eq!(nonce_of_file("cyclix-drill-0123abcd"), Some("0123abcd"));
        assert_eq!(
            nonce_of_file("cyclix-drill-0123abcd-outside"),
            Some("0123abcd")
        );
        assert_eq!(
            nonce_of_file("cyclix-drill-0123abcd.sock"),
            Some("0123abcd")
        );
        assert_eq!(nonce_of_file("cyclix-drill-xyz"), None);
        assert_eq!(nonce_of_file("cyclix-drill-0123"), None, "too short");
        assert_eq!(nonce_of_file(".cyclix-escape-r1"), None);
        assert_eq!(tag("ab"), "drill-ab");
    }
}
