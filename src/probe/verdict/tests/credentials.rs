//! The credentials verdicts (P22, P23): passing and failing fixtures.

use super::*;
use crate::probe::verdict::credentials::*;

#[test]
fn p22_environment() {
    let c = ctx();
    let v = |n: &str, h: &str| {
        (
            "/proc/self/environ".to_string(),
            n.to_string(),
            h.to_string(),
        )
    };
    let ok = EnvObs {
        vars: vec![v("HTTP_PROXY", "00"), v("HOME", "01"), v("API_TOKEN", "02")],
        sources: 2,
    };
    assert!(p22(&ok, &c).pass, "an allowed secret name is fine");
    for bad in [
        v("CYCLIX_PROBE_CANARY", "03"),
        v("GITHUB_TOKEN", "04"),
        v("XDG_RUNTIME_DIR", "05"),
        v("INNOCENT", &"AB".repeat(32)),
    ] {
        let mut o = ok.clone();
        o.vars.push(bad.clone());
        assert!(!p22(&o, &c).pass, "{bad:?}");
    }
}

#[test]
fn p22_a_name_alone_is_the_agents_doing_during_the_watch_only() {
    let mut c = ctx();
    c.value_watched_env_names = vec!["CYCLIX_PROBE_CANARY".into()];
    let forbidden = "ab".repeat(32);
    let o = |name: &str, hash: &str| EnvObs {
        vars: vec![
            ("/proc/self/environ".into(), "HOME".into(), "01".into()),
            ("/proc/7/environ".into(), name.into(), hash.into()),
        ],
        sources: 2,
    };
    let named = o("CYCLIX_PROBE_CANARY", "03");
    assert!(
        !p22(&named, &c).pass,
        "before the agent runs a name alone fails"
    );
    c.watch = true;
    let j = p22(&named, &c);
    assert!(j.pass, "{j:?}");
    assert_eq!(
        j.detail,
        format!("{NAMED_ONLY}/proc/7/environ: CYCLIX_PROBE_CANARY")
    );
    assert!(
        !p22(&o("CYCLIX_PROBE_CANARY", &forbidden), &c).pass,
        "the watched value under its name fails"
    );
    assert!(
        !p22(&o("ELSEWHERE", &forbidden), &c).pass,
        "the watched value under another name fails"
    );
    c.value_watched_env_names.clear();
    assert!(
        !p22(&named, &c).pass,
        "a name whose value is not checked fails by name"
    );
}

#[test]
fn p23_keyrings() {
    let empty_user = Keyring {
        own: "keyring;0;65534;1f3f0000;_uid.0".into(),
        linked: Ok(vec![]),
    };
    let ses = |linked| Keyring {
        own: "keyring;0;0;3f030000;_ses".into(),
        linked: Ok(linked),
    };
    let measured = ses(vec![("keyring;0;65534;1f3f0000;_uid.1000".into(), Ok(0))]);
    assert!(p23(true, &measured, &empty_user).pass);
    assert!(
        !p23(false, &measured, &empty_user).pass,
        "/proc/keys readable"
    );
    assert!(
        !p23(
            true,
            &ses(vec![("keyring;0;65534;1f3f0000;_uid.1000".into(), Ok(2))]),
            &empty_user
        )
        .pass,
        "host user's keys readable"
    );
    assert!(
        !p23(
            true,
            &ses(vec![("user;0;0;3f010000;token".into(), Ok(1))]),
            &empty_user
        )
        .pass
    );
    // systemd's invocation_id key (KeyringMode=private) is allowed, nothing else is.
    let invocation = ("user;0;0;0b0b0000;invocation_id".to_string(), Ok(1));
    assert!(p23(true, &ses(vec![invocation.clone()]), &empty_user).pass);
    assert!(
        !p23(
            true,
            &ses(vec![invocation, ("user;0;0;3f010000;token".into(), Ok(1))]),
            &empty_user
        )
        .pass
    );
}

#[test]
fn p22_a_secret_looking_name_the_agent_set_is_recorded_during_the_watch_not_failed() {
    let mut c = ctx();
    let v = |n: &str, h: &str| ("/proc/9/environ".to_string(), n.to_string(), h.to_string());
    let o = EnvObs {
        vars: vec![v("HOME", "01"), v("TIKTOKEN_CACHE_DIR", "02")],
        sources: 2,
    };
    assert!(
        !p22(&o, &c).pass,
        "before the agent runs the name alone fails"
    );
    c.watch = true;
    let j = p22(&o, &c);
    assert!(j.pass, "{j:?}");
    assert!(j.detail.contains("TIKTOKEN_CACHE_DIR"), "recorded: {j:?}");
    // A watched VALUE still fails during the watch (positive control of the value check).
    let mut leak = o.clone();
    leak.vars
        .push(v("ANYTHING", &c.forbidden_env_sha256[0].clone()));
    assert!(!p22(&leak, &c).pass);
}
