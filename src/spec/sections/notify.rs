//! `notify:` who is told when a run needs a person (issue 18, item 6): an argv run on the host
//! by `cyclix-notify@TENANT.service` through the run unit's `OnFailure=` (and `OnSuccess=` when
//! asked), with the run's summary as JSON on its stdin.

use crate::spec::keys::{Key, Kind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::argv;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Notify};

/// `notify:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawNotify {
    /// The mapping.
    pub(crate) at: Pos,
    /// `command`.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `on_success`.
    pub(crate) on_success: Option<Located<bool>>,
}

/// The keys of `notify:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "command",
        Kind::StrList,
        "argv run on the host (outside any sandbox) with the run summary as JSON on stdin",
        Some("`command: [sendmail, you@example.com]`"),
    ),
    Key::optional(
        "on_success",
        Kind::Bool,
        "also when a run passes (default false: only failures, refusals, leftovers)",
    ),
];

/// Reads `notify:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawNotify> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawNotify {
        at: f.pos(),
        command: d.strings(&f, "command"),
        on_success: d.boolean(&f, "on_success"),
    })
}

/// Validates `notify:`: the argv (as `gate.command`), `on_success` (default false).
pub(crate) fn validate(n: &RawNotify, out: &mut Vec<Diagnostic>) -> Option<Notify> {
    let _ = &n.at;
    Some(Notify {
        command: argv(n.command.as_ref(), true, out)?,
        on_success: n.on_success.as_ref().is_some_and(|b| b.value),
    })
}

#[cfg(test)]
mod tests {
    use crate::spec::{Notify, SpecContext, parse};

    const BASE: &str = "tenant: z\nrepo: { path: /srv/z, base: main }\ntask: { text: x }\nagent:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\ngate:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\n";

    fn ctx() -> SpecContext {
        SpecContext {
            file: "z.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1000".into(),
        }
    }

    #[test]
    fn notify_is_an_argv_and_on_success_defaults_to_false() {
        let spec = parse(&format!("{BASE}notify:\n  command: [mail, me]\n"), &ctx()).expect("ok");
        assert_eq!(
            spec.notify,
            Some(Notify {
                command: vec!["mail".into(), "me".into()],
                on_success: false
            })
        );
        assert_eq!(parse(BASE, &ctx()).expect("ok").notify, None);
        let e = parse(&format!("{BASE}notify:\n  command: []\n"), &ctx()).expect_err("empty");
        assert!(
            e.to_string()
                .starts_with("z.yaml:13:12: notify.command: `command` is empty"),
            "{e}"
        );
        let e = parse(&format!("{BASE}notify: {{ on_success: true }}\n"), &ctx())
            .expect_err("no command");
        assert!(
            e.to_string()
                .contains("notify.command: missing required key `command`"),
            "{e}"
        );
    }
}
