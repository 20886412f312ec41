//! `cyclix::podman` against the real podman 5.4 in the testbed.
//!
//! The test runs twice: on the host it re-runs its own test binary inside the testbed as the
//! test user (`Testbed::user_sh`, project mounted at `Testbed::src()`), with
//! `CYCLIX_TEST_PODMAN_ADAPTER_INNER=1`; inside, that variable makes it drive real podman:
//! build an image offline, create a secret through stdin, create labelled objects, list them by
//! label, remove them twice (idempotence) and prove nothing is left. Every podman call the
//! adapter makes goes through a recording wrapper, so the test proves the secret's value never
//! appears in any podman argv.
//!
//! Testbed facts it relies on: `docker.io/library/busybox:latest` is in the test user's image
//! store (the testbed imports it; there is no registry).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cyclix::podman::Podman;
use cyclix::process;

use crate::common::testbed::Testbed;

const INNER_ENV: &str = "CYCLIX_TEST_PODMAN_ADAPTER_INNER";
const TEST_NAME: &str = "podman_adapter::podman_adapter_against_real_podman";
const OK_LINE: &str = "podman adapter: ok";
const BASE: &str = "docker.io/library/busybox:latest";
const T: Duration = Duration::from_secs(60);

#[test]
fn podman_adapter_against_real_podman() {
    if std::env::var_os(INNER_ENV).is_some() {
        roundtrip();
        return;
    }
    let tb = Testbed::get();
    let exe = std::env::current_exe().expect("test binary path");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rel = exe.strip_prefix(root).unwrap_or_else(|_| {
        panic!(
            "the test binary {} is outside the project {}, so the testbed cannot see it: \
             build with the default target dir",
            exe.display(),
            root.display()
        )
    });
    let inside = Path::new(tb.src()).join(rel);
    let out = tb.user_sh(&format!(
        "{INNER_ENV}=1 '{}' --exact {TEST_NAME} --nocapture --test-threads=1",
        inside.display()
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(OK_LINE),
        "inner run failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// Removes everything labelled with the run's label, best effort, on every exit path.
struct Cleanup {
    podman: Podman,
    label: String,
    secret: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let p = &self.podman;
        if let Ok(pods) = p.pods(&self.label) {
            let _ = p.rm_pods(&pods.into_iter().map(|x| x.id).collect::<Vec<_>>());
        }
        if let Ok(cs) = p.containers(&self.label) {
            let _ = p.rm_containers(&cs.into_iter().map(|x| x.id).collect::<Vec<_>>());
        }
        if let Ok(ns) = p.networks(&self.label) {
            let _ = p.rm_networks(&ns.into_iter().map(|x| x.name).collect::<Vec<_>>());
        }
        if let Ok(vs) = p.volumes(&self.label) {
            let _ = p.rm_volumes(&vs.into_iter().map(|x| x.name).collect::<Vec<_>>());
        }
        let _ = p.secret_rm(&self.secret);
        let _ = process::run("podman", &["rmi", "--ignore", &self.image], None, T, "");
    }
}

fn podman(args: &[&str]) -> String {
    process::run("podman", args, None, T, "")
        .unwrap_or_else(|e| panic!("{e}"))
        .stdout
}

fn timed<R>(what: &str, timings: &mut Vec<String>, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    timings.push(format!("{what} {} ms", t.elapsed().as_millis()));
    r
}

fn cmdlines_containing(needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let path = entry.path().join("cmdline");
        let found = std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle));
        if found {
            hits.push(path);
        }
    }
    hits
}

#[allow(clippy::too_many_lines)]
fn roundtrip() {
    let id = format!("adapt{}", std::process::id());
    let tmp = tempfile::tempdir().expect("tempdir");
    // Every adapter call goes through this wrapper, which records its argv.
    let argv_log = tmp.path().join("argv.log");
    let wrapper = tmp.path().join("podman");
    crate::common::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec podman \"$@\"\n",
            argv_log.display()
        ),
    );
    let p = Podman::with_bin(wrapper.to_string_lossy());

    let label = format!("io.cyclix.run={id}");
    let labels = [
        ("io.cyclix.tenant", "adaptertest"),
        ("io.cyclix.run", id.as_str()),
    ];
    let label_args: Vec<String> = labels
        .iter()
        .flat_map(|(k, v)| ["--label".to_string(), format!("{k}={v}")])
        .collect();
    let label_args: Vec<&str> = label_args.iter().map(String::as_str).collect();
    let secret = format!("cyclix-{id}-KEY");
    let image = format!("localhost/cyclix-adapter-test:{id}");
    let _cleanup = Cleanup {
        podman: p.clone(),
        label: label.clone(),
        secret: secret.clone(),
        image: image.clone(),
    };
    let mut timings = Vec::new();

    let version = timed("version", &mut timings, || p.version()).expect("version");
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("version {version:?}"));
    assert!(major >= 4, "{version}");

    assert!(
        p.image_exists(BASE).expect("exists"),
        "testbed lacks {BASE}"
    );
    assert!(
        !p.image_exists("localhost/cyclix-no-such-image:0")
            .expect("exists")
    );
    let e = p.image_exists("bad ref!!").expect_err("invalid reference");
    assert!(e.to_string().contains("invalid reference format"), "{e}");

    // Build offline from the local base (`--pull=missing` pulls nothing).
    let ctx = tmp.path().join("ctx");
    std::fs::create_dir(&ctx).expect("ctx");
    std::fs::write(
        ctx.join("Containerfile"),
        format!("FROM {BASE}\nRUN echo built > /built\n"),
    )
    .expect("containerfile");
    let image_id = timed("build", &mut timings, || {
        p.build(
            &image,
            &ctx.join("Containerfile"),
            &ctx,
            Duration::from_secs(120),
        )
    })
    .expect("build");
    assert!(image_id.len() >= 12, "{image_id}");
    assert!(p.image_exists(&image).expect("built image exists"));
    std::fs::write(ctx.join("Bad"), "FROM localhost/cyclix-no-such-base:0\n").expect("bad");
    let e = p
        .build(&format!("{image}-bad"), &ctx.join("Bad"), &ctx, T)
        .expect_err("missing base");
    assert!(e.to_string().contains("building image"), "{e}");

    // The secret: value on stdin, usable as env in a container, never in argv.
    let value = format!(
        "cyclix-canary-{id}-{}",
        u64::from(std::process::id()) * 7919
    );
    timed("secret create", &mut timings, || {
        p.secret_create(&secret, value.as_bytes(), &labels)
    })
    .expect("secret create");
    let e = p
        .secret_create(&secret, b"other", &labels)
        .expect_err("name in use");
    assert!(e.to_string().contains("in use"), "{e}");
    assert_eq!(
        p.secrets(&format!("cyclix-{id}-")).expect("secrets"),
        std::slice::from_ref(&secret)
    );

    // Objects as a run creates them (Quadlet does this in production).
    let net = format!("cyclix-{id}-int");
    let vol = format!("cyclix-{id}-vol");
    let pod = format!("cyclix-{id}");
    podman(
        &[
            &["network", "create", "--internal"],
            &label_args[..],
            &[&net],
        ]
        .concat(),
    );
    podman(&[&["volume", "create"], &label_args[..], &[&vol]].concat());
    podman(
        &[
            &["pod", "create", "--name", &pod, "--network", &net],
            &label_args[..],
        ]
        .concat(),
    );
    let secret_opt = format!("{secret},type=env,target=CYCLIX_SMOKE_SECRET");
    let vol_opt = format!("{vol}:/data");
    let agent = format!("cyclix-{id}-agent");
    podman(
        &[
            &[
                "run",
                "-d",
                "--name",
                &agent,
                "--pod",
                &pod,
                "--secret",
                &secret_opt,
                "-v",
                &vol_opt,
            ][..],
            &label_args[..],
            &[&image, "sleep", "300"],
        ]
        .concat(),
    );
    let gate = format!("cyclix-{id}-gate");
    podman(
        &[
            &["create", "--name", &gate, "--network", "none"][..],
            &label_args[..],
            &[&image, "true"],
        ]
        .concat(),
    );
    assert_eq!(
        podman(&[
            "exec",
            &agent,
            "sh",
            "-c",
            "printf %s \"$CYCLIX_SMOKE_SECRET\""
        ]),
        value,
        "the secret reaches the container as env"
    );
    assert_eq!(podman(&["exec", &agent, "cat", "/built"]), "built\n");
    let hits = cmdlines_containing(value.as_bytes());
    assert!(hits.is_empty(), "secret value in a process argv: {hits:?}");

    // Inventory by label.
    let cs = timed("containers", &mut timings, || p.containers(&label)).expect("containers");
    let mut names: Vec<(String, String, bool)> = cs
        .iter()
        .map(|c| (c.names.join(","), c.state.clone(), c.is_infra))
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names.contains(&(agent.clone(), "running".into(), false)),
        "{names:?}"
    );
    assert!(
        names.contains(&(gate.clone(), "created".into(), false)),
        "{names:?}"
    );
    assert!(names.iter().any(|(_, _, infra)| *infra), "{names:?}");
    assert!(
        cs.iter()
            .all(|c| c.labels.get("io.cyclix.run") == Some(&id)),
        "{cs:?}"
    );
    let pods = p.pods(&label).expect("pods");
    assert_eq!(
        pods.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
        [pod.as_str()]
    );
    let nets = p.networks(&label).expect("networks");
    assert_eq!(nets.len(), 1, "{nets:?}");
    assert!(nets[0].internal && nets[0].name == net, "{nets:?}");
    let vols = p.volumes(&label).expect("volumes");
    assert_eq!(
        vols.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
        [vol.as_str()]
    );
    // Another run's label sees none of it.
    assert!(
        p.containers("io.cyclix.run=other-run")
            .expect("none")
            .is_empty()
    );

    // Removal, twice: the second pass finds nothing and still succeeds.
    for pass in ["remove", "remove again"] {
        let pod_ids: Vec<String> = pods.iter().map(|x| x.id.clone()).collect();
        let ids: Vec<String> = cs
            .iter()
            .filter(|c| !c.is_infra)
            .map(|c| c.id.clone())
            .collect();
        let net_names: Vec<String> = nets.iter().map(|x| x.name.clone()).collect();
        let vol_names: Vec<String> = vols.iter().map(|x| x.name.clone()).collect();
        timed(&format!("{pass}: pods"), &mut timings, || {
            p.rm_pods(&pod_ids)
        })
        .expect("rm pods");
        timed(&format!("{pass}: containers"), &mut timings, || {
            p.rm_containers(&ids)
        })
        .expect("rm containers");
        timed(&format!("{pass}: networks"), &mut timings, || {
            p.rm_networks(&net_names)
        })
        .expect("rm networks");
        timed(&format!("{pass}: volumes"), &mut timings, || {
            p.rm_volumes(&vol_names)
        })
        .expect("rm volumes");
        let removed = p.secret_rm(&secret).expect("rm secret");
        assert_eq!(removed, pass == "remove", "{pass}");
    }
    assert!(p.containers(&label).expect("containers").is_empty());
    assert!(p.pods(&label).expect("pods").is_empty());
    assert!(p.networks(&label).expect("networks").is_empty());
    assert!(p.volumes(&label).expect("volumes").is_empty());
    assert!(
        p.secrets(&format!("cyclix-{id}-"))
            .expect("secrets")
            .is_empty()
    );

    let log = std::fs::read_to_string(&argv_log).expect("argv log");
    assert!(log.contains("secret create --label"), "{log}");
    assert!(!log.contains(&value), "secret value in podman argv:\n{log}");
    println!("argv of the adapter's podman calls:\n{log}");
    println!("timings: {}", timings.join(", "));
    println!("{OK_LINE} (podman {version}, image {image_id})");
}
