//! Credentials (P22, P23): every readable environment (values only as sha256), the
//! session and user keyrings.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};

use sha2::{Digest as _, Sha256};

use crate::probe::Context;
use crate::probe::sys::{self};
use crate::probe::verdict::credentials as v;
use crate::probe::verdict::{Judged, errno_name};

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().fold(String::new(), |mut s, x| {
        use std::fmt::Write as _;
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The variables of an `environ` file (`NAME=value` entries separated by NUL bytes; empty
/// entries skipped, an entry without `=` is a name with an empty value) as (NAME, sha256 of
/// the value in lowercase hex): values are never kept.
#[must_use]
pub fn parse_environ(bytes: &[u8]) -> Vec<(String, String)> {
    bytes
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, val) = match kv.iter().position(|b| *b == b'=') {
                Some(i) => (&kv[..i], &kv[i + 1..]),
                None => (kv, &[][..]),
            };
            (String::from_utf8_lossy(k).into_owned(), sha256_hex(val))
        })
        .collect()
}

/// P22: our environment and every readable `/proc/*/environ`.
#[must_use]
pub fn p22(ctx: &Context) -> Judged {
    let mut o = v::EnvObs::default();
    let mut files = vec!["/proc/self/environ".to_string()];
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.bytes().all(|b| b.is_ascii_digit()) {
                files.push(format!("/proc/{n}/environ"));
            }
        }
    }
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        o.sources += 1;
        for (k, hash) in parse_environ(&bytes) {
            o.vars.push((f.clone(), k, hash));
        }
    }
    v::p22(&o, ctx)
}

/// Describes a key (`type;uid;gid;perm;description`), or its errno.
fn describe(key: i32) -> String {
    let mut buf = [0u8; 512];
    match sys::keyctl_describe(key, &mut buf) {
        Ok(_) => String::from_utf8_lossy(buf.split(|b| *b == 0).next().unwrap_or(&[])).into_owned(),
        Err(e) => errno_name(e),
    }
}

/// Reads a keyring: its own description and the descriptions of the keys linked to it.
fn keyring(special: i32) -> v::Keyring {
    let mut buf = [0u8; 4096];
    let linked = sys::keyctl_read(special, &mut buf).map(|n| {
        let n = usize::try_from(n).unwrap_or(0).min(buf.len());
        buf[..n]
            .chunks_exact(4)
            .map(|c| {
                let id = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                let d = describe(id);
                let mut inner = [0u8; 4096];
                let n = if d.starts_with("keyring;") {
                    sys::keyctl_read(id, &mut inner).map(|n| usize::try_from(n / 4).unwrap_or(0))
                } else {
                    Ok(1)
                };
                (d, n)
            })
            .collect()
    });
    v::Keyring {
        own: describe(special),
        linked,
    }
}

/// P23.
#[must_use]
pub fn p23(_: &Context) -> Judged {
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let masked = std::fs::metadata("/proc/keys")
        .is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null);
    v::p23(masked, &keyring(-3), &keyring(-4))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY_SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn environ_entries_become_names_and_value_hashes() {
        let v = parse_environ(b"HOME=/root\0PATH=/usr/bin:/bin\0A=b=c\0");
        let names: Vec<&str> = v.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "PATH", "A"]);
        assert_eq!(v[2].1, sha256_hex(b"b=c"), "split at the first =");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn odd_environ_entries() {
        assert!(parse_environ(b"").is_empty());
        assert!(parse_environ(b"\0\0").is_empty());
        assert_eq!(
            parse_environ(b"NOEQ\0E=\0"),
            [
                ("NOEQ".into(), EMPTY_SHA.into()),
                ("E".into(), EMPTY_SHA.into())
            ]
        );
        let v = parse_environ(b"X\xff=1\0=v");
        assert_eq!(
            v[0].0, "X\u{fffd}",
            "a name that is not UTF-8 is shown, replaced"
        );
        assert_eq!(v[1], (String::new(), sha256_hex(b"v")));
    }
}
