//! The kernel verdicts (P10–P12, P24): passing and failing fixtures.

use super::*;
use crate::probe::verdict::kernel::*;

#[test]
fn p10_to_p12_devices_masks_knobs() {
    let dev = DevObs {
        entries: vec!["null".into(), "zero".into(), "pts".into()],
        null_ok: true,
        mknod: E(libc::EPERM),
    };
    assert!(p10(&dev).pass);
    assert!(
        !p10(&DevObs {
            entries: vec!["sda".into()],
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            entries: vec!["net/tun".into()],
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            mknod: Attempt::Ok,
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            null_ok: false,
            ..dev
        })
        .pass
    );

    let keys = ("/proc/keys".to_string(), Masked::NullDev);
    assert!(
        p11(&[
            keys.clone(),
            ("/proc/acpi".into(), Masked::EmptyDir),
            ("/proc/scsi".into(), Masked::Absent)
        ])
        .pass
    );
    assert!(
        !p11(&[
            keys,
            (
                "/sys/firmware".into(),
                Masked::Exposed("a non-empty directory".into())
            )
        ])
        .pass
    );
    assert!(
        !p11(&[("/proc/acpi".into(), Masked::EmptyDir)]).pass,
        "control: /proc/keys must be masked"
    );

    let measured = items(&[
        ("/proc/sys/kernel/core_pattern", E(libc::EACCES)),
        ("/proc/sysrq-trigger", E(libc::ENOENT)),
        ("/sys/kernel/uevent_helper", E(libc::ENOENT)),
        ("/sys/fs/cgroup/cgroup.procs", E(libc::EROFS)),
    ]);
    assert!(p12(&measured).pass);
    assert!(!p12(&items(&[("/proc/sys/kernel/core_pattern", Attempt::Ok)])).pass);
    assert!(
        !p12(&items(&[(
            "/proc/sys/kernel/core_pattern",
            E(libc::ENOENT)
        )]))
        .pass,
        "ENOENT only for optional knobs"
    );
}

#[test]
fn p24_kernel_log_and_symbols() {
    let k = KernelObs {
        syslog: E(libc::EPERM),
        dmesg_restrict: Some("1".into()),
        kallsyms: (5000, 0),
        modules_dir: false,
    };
    assert!(p24(&k).pass);
    assert!(
        !p24(&KernelObs {
            syslog: Attempt::Ok,
            dmesg_restrict: Some("0".into()),
            ..k.clone()
        })
        .pass
    );
    assert!(
        !p24(&KernelObs {
            kallsyms: (5000, 12),
            ..k.clone()
        })
        .pass
    );
    assert!(
        !p24(&KernelObs {
            kallsyms: (0, 0),
            ..k.clone()
        })
        .pass,
        "kallsyms unreadable: no control"
    );
    assert!(
        !p24(&KernelObs {
            modules_dir: true,
            ..k
        })
        .pass
    );
}

#[test]
fn p25_under_gvisor_needs_another_release_and_gvisors_log_and_the_shared_kernel_fails() {
    use crate::probe::Profile;
    let gv = KernelIdObs {
        release: "4.4.0".into(),
        log_head: Ok(GVISOR_LOG_HEAD.into()),
        host_release: "6.18.44".into(),
    };
    assert!(
        p25(&gv, Profile::Gvisor).pass,
        "{:?}",
        p25(&gv, Profile::Gvisor)
    );
    // Positive control: what a tier-container sandbox shows (the host's release, the kernel
    // log refused) fails the gVisor verdict, and passes the podman one saying it is shared.
    let shared = KernelIdObs {
        release: "6.18.44".into(),
        log_head: Err(libc::EPERM),
        host_release: "6.18.44".into(),
    };
    let j = p25(&shared, Profile::Gvisor);
    assert!(!j.pass && j.detail.contains("not gVisor"), "{j:?}");
    let j = p25(&shared, Profile::Podman);
    assert!(j.pass && j.detail.contains("host's kernel"), "{j:?}");
    // Neither half alone passes: another release without gVisor's log, gVisor's log line on
    // the host's release, or no host release to compare with.
    for o in [
        KernelIdObs {
            log_head: Ok("Linux version 5.10".into()),
            ..gv.clone()
        },
        KernelIdObs {
            release: "6.18.44".into(),
            ..gv.clone()
        },
        KernelIdObs {
            host_release: String::new(),
            ..gv.clone()
        },
    ] {
        assert!(!p25(&o, Profile::Gvisor).pass, "{o:?}");
    }
}
