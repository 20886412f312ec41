//! A warm pool's keeper across an upgrade of its binary (issue 16): `e2e_pool_keep`'s keeper,
//! run from a copy of cyclix that is then replaced.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::drain;
use crate::e2e_pool_keep::{holds, ready, wait};

/// An upgrade replaces the binary a keeper runs (a new file in its place, the old one
/// deleted): the keeper's next fill copies the binary it runs (`/proc/self/exe`), not the
/// path, and the pool refills. The keeper runs from a transient unit of its own here, so the
/// unit template other tests install is not touched.
#[test]
fn a_keeper_whose_binary_was_replaced_keeps_filling() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolup")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    let (bin, unit) = ("~/.local/bin/cyclix-up", format!("e2e-keeper-{t}"));
    // Whatever happens below, the keeper stops and its pool goes (`e2e_soak` wants a host with
    // nothing of cyclix's on it once every test is done).
    let cleanup = StopKeeper {
        tb,
        unit: unit.clone(),
        bin,
        tenant: t.clone(),
    };
    expect_success(
        &tb.user_sh(&format!(
            "systemctl --user stop {unit} 2>/dev/null; systemctl --user reset-failed {unit} 2>/dev/null
             set -e; mkdir -p ~/.local/bin; cp {} {bin}
             systemd-run --user --quiet --collect --unit {unit} {bin} pool keep {t}",
            tb.cyclix_bin()
        )),
        "a keeper from a copy of cyclix",
    );
    wait(tb, &t, 120, &holds(&t, 1), "the keeper fills the pool");
    // The upgrade; control: the keeper now runs a deleted file.
    let exe = expect_success(
        &tb.user_sh(&format!(
            "set -e; cp {bin} {bin}.new; mv {bin}.new {bin}
             readlink /proc/$(systemctl --user show -p MainPID --value {unit})/exe"
        )),
        "replace the binary",
    );
    assert!(exe.trim().ends_with("(deleted)"), "{exe}");
    let out = tb.user_sh(&format!("{bin} run {t}"));
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    wait(
        tb,
        &t,
        120,
        &holds(&t, 1),
        "the keeper refills after its binary was replaced",
    );
    let refilled = ready(tb, &t);
    drop(cleanup);
    for e in &refilled {
        let left = leftovers(tb, e, &t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
}

/// Stops a keeper started from its own transient unit, removes its binary and destroys its
/// pool, when dropped (a failed assertion included: nothing here may panic).
struct StopKeeper<'a> {
    tb: &'a Testbed,
    unit: String,
    bin: &'static str,
    tenant: String,
}

impl Drop for StopKeeper<'_> {
    fn drop(&mut self) {
        let (u, b, t) = (&self.unit, self.bin, &self.tenant);
        let _ = self.tb.user_sh(&format!(
            "systemctl --user stop {u} 2>/dev/null; rm -f {b}; {} pool expire {t} --now-ms 99999999999999",
            self.tb.cyclix_bin()
        ));
    }
}
