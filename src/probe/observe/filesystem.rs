//! Filesystems (P13–P18): `/proc/self/mountinfo`, writes on the root, in scratch space and
//! in the project (removed at once), the user's git dir.

use std::os::unix::fs::MetadataExt as _;

use super::{create_remove, euid, unique};
use crate::probe::Context;
use crate::probe::clients::io_attempt;
use crate::probe::verdict::filesystem as v;
use crate::probe::verdict::filesystem::Mount;
use crate::probe::verdict::{Attempt, Judged};

/// Parses `/proc/self/mountinfo` (octal escapes like `\040` decoded).
#[must_use]
pub fn mountinfo() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_mountinfo_line)
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = std::str::from_utf8(b.get(i + 1..i + 4).unwrap_or(&[]))
            .ok()
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        if let (b'\\', Some(n)) = (b[i], octal) {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mountinfo line → [`Mount`].
#[must_use]
pub fn parse_mountinfo_line(l: &str) -> Option<Mount> {
    let (left, right) = l.split_once(" - ")?;
    let f: Vec<&str> = left.split(' ').collect();
    if f.len() < 6 {
        return None;
    }
    Some(Mount {
        root: unescape(f[3]),
        point: unescape(f[4]),
        opts: f[5].split(',').map(str::to_string).collect(),
        fstype: right.split(' ').next().unwrap_or("").to_string(),
    })
}

/// The host uid that `uid` maps to, from our `uid_map`.
fn host_uid_of(uid: u32) -> Option<u32> {
    map_uid(&std::fs::read_to_string("/proc/self/uid_map").ok()?, uid)
}

/// The outside uid that `uid` maps to in a `uid_map` text (lines `INSIDE OUTSIDE COUNT`; the
/// first line whose range holds `uid` decides); `None` when no line maps it.
#[must_use]
pub fn map_uid(uid_map: &str, uid: u32) -> Option<u32> {
    uid_map.lines().find_map(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let (inside, outside, len) = (*f.first()?, *f.get(1)?, *f.get(2)?);
        let u = u64::from(uid);
        (u >= inside && u < inside.saturating_add(len))
            .then(|| u32::try_from(outside.checked_add(u - inside)?).ok())?
    })
}

/// P13.
#[must_use]
pub fn p13(ctx: &Context) -> Judged {
    v::p13(&mountinfo(), ctx.profile)
}

/// P14.
#[must_use]
pub fn p14(ctx: &Context) -> Judged {
    let items = vec![
        (
            "/probe-root".to_string(),
            create_remove(&format!("/{}", unique("root"))),
        ),
        (
            "/usr/probe".to_string(),
            create_remove(&format!("/usr/{}", unique("usr"))),
        ),
    ];
    v::p14(&items, ctx.profile)
}

fn write_cycle(dir: &str) -> Attempt {
    let p = format!("{dir}/.{}", unique("w"));
    let r = std::fs::write(&p, b"probe")
        .and_then(|()| std::fs::read(&p))
        .and_then(|b| {
            if b == b"probe" {
                Ok(())
            } else {
                Err(std::io::Error::other("read back differs"))
            }
        });
    let _ = std::fs::remove_file(&p);
    io_attempt(r)
}

/// P15.
#[must_use]
pub fn p15(_: &Context) -> Judged {
    let mounts = mountinfo();
    let items: Vec<v::ScratchObs> = ["/tmp", "/var/tmp", "/run", "/dev/shm"]
        .iter()
        .map(|d| v::ScratchObs {
            path: (*d).to_string(),
            write: write_cycle(d),
            mount: v::mount_at(&mounts, d).cloned(),
        })
        .collect();
    v::p15(&items, euid())
}

/// P16.
#[must_use]
pub fn p16(ctx: &Context) -> Judged {
    let a = format!("{}/.{}", ctx.workdir, unique("a"));
    let b = format!("{}/.{}", ctx.workdir, unique("b"));
    let mut owner = None;
    let r = std::fs::write(&a, b"probe")
        .and_then(|()| {
            owner = std::fs::metadata(&a).ok().map(|m| m.uid());
            std::fs::rename(&a, &b)
        })
        .and_then(|()| std::fs::remove_file(&b));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    let mounts = mountinfo();
    let own = euid();
    v::p16(
        &v::ProjectObs {
            cycle: io_attempt(r),
            owner,
            own_euid: own,
            host_uid_of_owner: owner.and_then(host_uid_of),
            mount: v::mount_at(&mounts, &ctx.workdir).cloned(),
        },
        ctx,
    )
}

/// P17: the user's git dir (its host path) does not exist in the sandbox; the positive
/// control writes in the private repository's own git dir.
#[must_use]
pub fn p17(ctx: &Context) -> Judged {
    let g = ctx.git_dir.trim_end_matches('/');
    let items = if g.is_empty() {
        vec![(
            ".git".to_string(),
            Attempt::Missing("context.git_dir is empty".into()),
        )]
    } else {
        let parent = std::path::Path::new(g)
            .parent()
            .map_or_else(|| "/".to_string(), |p| p.display().to_string());
        [
            g.to_string(),
            format!("{g}/config"),
            format!("{g}/hooks"),
            parent,
        ]
        .into_iter()
        .map(|p| {
            let a = io_attempt(std::fs::symlink_metadata(&p));
            (p, a)
        })
        .collect()
    };
    v::p17(&items, &write_cycle(&format!("{}/.git", ctx.workdir)))
}

/// P18.
#[must_use]
pub fn p18(ctx: &Context) -> Judged {
    v::p18(&mountinfo(), ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn a_mountinfo_line_gives_root_point_options_and_type() {
        let l = "36 35 0:31 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw";
        assert_eq!(
            parse_mountinfo_line(l),
            Some(Mount {
                point: "/sys/fs/cgroup".into(),
                root: "/".into(),
                opts: strings(&["ro", "nosuid", "nodev", "noexec", "relatime"]),
                fstype: "cgroup2".into(),
            })
        );
        // No optional fields; a bind mount's root below its filesystem.
        let l = "812 790 254:1 /home/u/p /work rw,relatime - ext4 /dev/vda1 rw";
        let m = parse_mountinfo_line(l).expect("a valid line");
        assert_eq!((m.root.as_str(), m.point.as_str()), ("/home/u/p", "/work"));
        assert_eq!(
            (m.opts, m.fstype.as_str()),
            (strings(&["rw", "relatime"]), "ext4")
        );
    }

    #[test]
    fn octal_escapes_are_decoded() {
        let l = r"90 35 0:50 /a\040b\011c /mnt/my\040dir\134x rw - tmpfs tmpfs rw";
        let m = parse_mountinfo_line(l).expect("a valid line");
        assert_eq!(m.root, "/a b\tc");
        assert_eq!(m.point, "/mnt/my dir\\x");
        assert_eq!(unescape(r"plain"), "plain");
        // Not an escape: too short, not octal, or a lone backslash at the end.
        assert_eq!(unescape(r"a\04"), r"a\04");
        assert_eq!(unescape(r"a\089b"), r"a\089b");
        assert_eq!(unescape("a\\"), "a\\");
        // \377 is one byte that is not UTF-8 on its own: replaced, not a panic.
        assert_eq!(unescape(r"x\377"), "x\u{fffd}");
    }

    #[test]
    fn bad_mountinfo_lines_are_none() {
        assert_eq!(parse_mountinfo_line(""), None);
        assert_eq!(
            parse_mountinfo_line("36 35 0:31 / /sys rw"),
            None,
            "no separator"
        );
        assert_eq!(
            parse_mountinfo_line("36 35 / /sys - sysfs"),
            None,
            "five fields"
        );
        assert_eq!(
            parse_mountinfo_line("1 2 3 / /x rw -"),
            None,
            "no \" - \" separator"
        );
        let m = parse_mountinfo_line("1 2 3 / /x rw - ").expect("six fields");
        assert_eq!(m.fstype, "", "the type is missing, not invented");
    }

    #[test]
    fn a_uid_maps_through_the_line_that_holds_it() {
        let m = "         0       1000          1\n         1     200000      65536\n";
        assert_eq!(map_uid(m, 0), Some(1000));
        assert_eq!(map_uid(m, 1), Some(200_000));
        assert_eq!(map_uid(m, 65536), Some(265_535));
        assert_eq!(map_uid(m, 65537), None, "past the last range");
        assert_eq!(
            map_uid("0 0 4294967295", 1000),
            Some(1000),
            "the host's identity map"
        );
        assert_eq!(map_uid("", 0), None);
        assert_eq!(
            map_uid("0 1000\nx y z\n", 0),
            None,
            "short or unparsable lines"
        );
        assert_eq!(map_uid("0 4294967295 2", 1), None, "outside the u32 range");
        assert_eq!(
            map_uid("18446744073709551615 0 18446744073709551615", 0),
            None
        );
    }
}
