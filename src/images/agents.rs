//! The agent preset images (`cyclix images build --preset P`): the pinned package lock
//! `images/agents/packages.lock` (embedded), the preset Containerfiles (embedded) and the image
//! name rule. Pure: parsing and naming only; the build (hash check, podman) is
//! `app::images_cmd`, the download `scripts/fetch-agent-packages`.
//!
//! Lock format, one package per line (`#` comments, blank lines ignored), fields separated by
//! whitespace: `PRESET REGISTRY NAME VERSION URL ALGO:HEX`. `ALGO` is `sha512` (npm's
//! `dist.integrity`, base64 there, hex here) or `sha256` (`PyPI`'s `digests.sha256`). The first
//! line of a preset is its CLI; its release ([`Package::release`]: `NAME@VERSION` without the
//! npm platform-build suffix `-linux-x64`) gives the image tag's version and the
//! `io.cyclix.package` label. A package's file lives in the cache at `DIR/ALGO/HEX`.

use std::fmt;

/// Where the lock is in the repository (for messages).
pub const LOCK_PATH: &str = "images/agents/packages.lock";

/// The embedded lock.
pub const PACKAGES_LOCK: &str = include_str!("../../images/agents/packages.lock");

/// The presets with an image: (preset, its embedded Containerfile). `cyclix images build
/// --preset P` accepts exactly these names.
pub const PRESET_CONTAINERFILES: &[(&str, &str)] = &[
    (
        "claude-code",
        include_str!("../../images/agents/claude-code/Containerfile"),
    ),
    (
        "codex",
        include_str!("../../images/agents/codex/Containerfile"),
    ),
    (
        "gemini-cli",
        include_str!("../../images/agents/gemini-cli/Containerfile"),
    ),
    (
        "aider",
        include_str!("../../images/agents/aider/Containerfile"),
    ),
];

/// The suffix npm platform builds carry, on the package name
/// (`@anthropic-ai/claude-code-linux-x64`) or on the version (`@openai/codex@0.171.0-linux-x64`).
pub const PLATFORM_SUFFIX: &str = "-linux-x64";

/// The presets CI builds and `scripts/fetch-agent-packages` fetches by default.
pub const CI_PRESETS: &[&str] = &["claude-code", "codex"];

/// A digest algorithm of the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// SHA-512, 128 hex digits (npm).
    Sha512,
    /// SHA-256, 64 hex digits (`PyPI`).
    Sha256,
}

impl Algo {
    /// The lock's (and the cache directory's) name: `sha512`, `sha256`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha512 => "sha512",
            Self::Sha256 => "sha256",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Self::Sha512 => 128,
            Self::Sha256 => 64,
        }
    }
}

/// One package line of the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The preset it belongs to (`claude-code`).
    pub preset: String,
    /// `npm` or `pypi`.
    pub registry: String,
    /// The registry's package name (`@anthropic-ai/claude-code-linux-x64`).
    pub name: String,
    /// The exact version (`2.1.332`).
    pub version: String,
    /// Where `scripts/fetch-agent-packages` downloads it (https).
    pub url: String,
    /// The digest algorithm.
    pub algo: Algo,
    /// The digest, lowercase hex.
    pub hex: String,
    /// 1-based line number in the lock.
    pub line: usize,
    /// The line's text, for messages.
    pub text: String,
}

impl Package {
    /// The file's path below a cache directory: `ALGO/HEX`.
    #[must_use]
    pub fn cache_rel(&self) -> String {
        format!("{}/{}", self.algo.name(), self.hex)
    }

    /// The file name the URL ends in (`claude-code-linux-x64-2.1.332.tgz`, a wheel's name):
    /// the name a further package of a preset has in the build context (`packages/NAME`).
    #[must_use]
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }

    /// The release this file is a build of: `NAME` and `VERSION` without [`PLATFORM_SUFFIX`]
    /// (`@anthropic-ai/claude-code`, `2.1.332`; `@openai/codex`, `0.171.0`), i.e. what the
    /// user-facing package is called (`npm install -g @openai/codex@0.171.0`).
    #[must_use]
    pub fn release(&self) -> (&str, &str) {
        (
            self.name
                .strip_suffix(PLATFORM_SUFFIX)
                .unwrap_or(&self.name),
            self.version
                .strip_suffix(PLATFORM_SUFFIX)
                .unwrap_or(&self.version),
        )
    }

    /// `ALGO:HEX`, as in the lock (and the Containerfiles' `PKG_DIGEST` build argument).
    #[must_use]
    pub fn digest(&self) -> String {
        format!("{}:{}", self.algo.name(), self.hex)
    }
}

/// A bad lock line: `images/agents/packages.lock:LINE: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and the expected shape.
    pub message: String,
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{LOCK_PATH}:{}: {}", self.line, self.message)
    }
}

impl std::error::Error for LockError {}

fn tag_safe(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && !s.starts_with(['.', '-'])
}

/// Parses lock text (format in the module docs).
///
/// # Errors
/// The first bad line: wrong field count, unknown registry or algorithm, a digest that is not
/// lowercase hex of the algorithm's length, a URL that is not https, a preset or version that
/// cannot be part of an image tag.
pub fn parse_lock(text: &str) -> Result<Vec<Package>, LockError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.trim();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let err = |message: String| LockError { line, message };
        let f: Vec<&str> = body.split_whitespace().collect();
        let [preset, registry, name, version, url, digest] = f.as_slice() else {
            return Err(err(format!(
                "expected 6 fields `PRESET REGISTRY NAME VERSION URL ALGO:HEX`, got {}",
                f.len()
            )));
        };
        if preset.is_empty()
            || !preset
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(err(format!(
                "preset `{preset}`: use lowercase letters, digits and `-`"
            )));
        }
        // `debian`: a .deb of a Debian release (aider's interpreter, bookworm's python3.11),
        // digest from that release's signed Packages index; its version may hold `+`
        // (`3.11.2-6+deb12u9`), so a Debian line cannot be a preset's first (CLI) line.
        if !matches!(*registry, "npm" | "pypi" | "debian") {
            return Err(err(format!(
                "registry `{registry}`: expected npm, pypi or debian"
            )));
        }
        let first_of_preset = !out.iter().any(|p: &Package| p.preset == *preset);
        if *registry == "debian" && first_of_preset {
            return Err(err(
                "a debian package cannot be a preset's first line (that is its CLI)".into(),
            ));
        }
        let version_ok = if *registry == "debian" {
            tag_safe(&version.replace('+', "_"))
        } else {
            tag_safe(version)
        };
        if !version_ok {
            return Err(err(format!(
                "version `{version}`: letters, digits, `.`, `-`, `_` only (it is an image tag)"
            )));
        }
        let file = url.rsplit('/').next().unwrap_or_default();
        if !url.starts_with("https://")
            || file.is_empty()
            || file.starts_with('.')
            || !file
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
        {
            return Err(err(format!(
                "URL `{url}`: must be https and end in a file name (letters, digits, `.-_+`)"
            )));
        }
        let (algo_name, hex) = digest.split_once(':').unwrap_or(("", digest));
        let algo = match algo_name {
            "sha512" => Algo::Sha512,
            "sha256" => Algo::Sha256,
            other => {
                return Err(err(format!(
                    "digest `{digest}`: algorithm `{other}` is not sha512 or sha256 (write ALGO:HEX)"
                )));
            }
        };
        if hex.len() != algo.hex_len()
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(err(format!(
                "digest `{digest}`: expected {} lowercase hex digits after `{}:`",
                algo.hex_len(),
                algo.name()
            )));
        }
        out.push(Package {
            preset: (*preset).to_string(),
            registry: (*registry).to_string(),
            name: (*name).to_string(),
            version: (*version).to_string(),
            url: (*url).to_string(),
            algo,
            hex: hex.to_string(),
            line,
            text: body.to_string(),
        });
    }
    Ok(out)
}

/// The packages of `preset` in the embedded lock, CLI first; empty for an unknown preset.
///
/// # Errors
/// A bad line in the embedded lock (a unit test keeps it valid).
pub fn packages(preset: &str) -> Result<Vec<Package>, LockError> {
    Ok(parse_lock(PACKAGES_LOCK)?
        .into_iter()
        .filter(|p| p.preset == preset)
        .collect())
}

/// The embedded Containerfile of `preset`, if it has an image.
#[must_use]
pub fn containerfile(preset: &str) -> Option<&'static str> {
    PRESET_CONTAINERFILES
        .iter()
        .find(|(p, _)| *p == preset)
        .map(|(_, text)| *text)
}

/// The image name rule: `localhost/cyclix-agent-PRESET:VERSION`, `VERSION` being the release
/// version of the preset's CLI (its first lock line, [`Package::release`]).
#[must_use]
pub fn image_name(preset: &str, cli: &Package) -> String {
    format!("localhost/cyclix-agent-{preset}:{}", cli.release().1)
}

/// The image tag `cyclix images build --preset PRESET` builds (e.g.
/// `localhost/cyclix-agent-claude-code:2.1.332`); `None` if `preset` has no image (no
/// Containerfile or no lock line).
#[must_use]
pub fn preset_image(preset: &str) -> Option<String> {
    containerfile(preset)?;
    let pkgs = packages(preset).ok()?;
    pkgs.first().map(|cli| image_name(preset, cli))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H512: &str = "7f8256873c18bad2481d2702eff75838f5fab36f2db7b6400e1b0e8bccf0387ab97c53c4b94782861d8d31f8a74a0d06ad472463169e79b0b88740ea88accb73";

    #[test]
    fn the_embedded_lock_is_valid_and_every_image_preset_has_a_cli_line() {
        let all = parse_lock(PACKAGES_LOCK).expect("embedded lock parses");
        for (preset, file) in PRESET_CONTAINERFILES {
            assert!(
                all.iter().any(|p| p.preset == *preset),
                "{preset} has no lock line"
            );
            assert!(file.contains(&format!("io.cyclix.image=agent-{preset}")));
        }
        for p in CI_PRESETS {
            assert!(containerfile(p).is_some(), "CI preset {p} has no image");
        }
    }

    #[test]
    fn preset_image_names_the_cli_version() {
        assert_eq!(
            preset_image("claude-code").as_deref(),
            Some("localhost/cyclix-agent-claude-code:2.1.332")
        );
        assert_eq!(
            preset_image("codex").as_deref(),
            Some("localhost/cyclix-agent-codex:0.171.0")
        );
        assert_eq!(
            preset_image("gemini-cli").as_deref(),
            Some("localhost/cyclix-agent-gemini-cli:0.61.0")
        );
        let cli = |p: &str| packages(p).expect("lock").swap_remove(0);
        assert_eq!(
            cli("claude-code").release(),
            ("@anthropic-ai/claude-code", "2.1.332")
        );
        assert_eq!(cli("codex").release(), ("@openai/codex", "0.171.0"));
        assert_eq!(preset_image("script"), None);
        assert_eq!(preset_image("nope"), None);
    }

    #[test]
    fn a_line_parses_into_its_fields_and_cache_path() {
        let text = format!("# c\n\nx npm @a/b 1.2.3 https://r/x.tgz sha512:{H512}\n");
        let p = parse_lock(&text).expect("parses");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].line, 3);
        assert_eq!(p[0].name, "@a/b");
        assert_eq!(p[0].cache_rel(), format!("sha512/{H512}"));
        assert_eq!(p[0].digest(), format!("sha512:{H512}"));
        assert_eq!(p[0].file_name(), "x.tgz");
    }

    #[test]
    fn bad_lines_name_the_line_and_the_problem() {
        let cases = [
            ("x npm a 1 https://r", "expected 6 fields"),
            (
                &*format!("x npm a 1 http://r/x sha512:{H512}"),
                "must be https",
            ),
            (
                &*format!("x npm a 1 https://r/ sha512:{H512}"),
                "end in a file name",
            ),
            (
                &*format!("x npm a 1 https://r/.. sha512:{H512}"),
                "end in a file name",
            ),
            (
                &*format!("x cargo a 1 https://r/x sha512:{H512}"),
                "npm, pypi or debian",
            ),
            (
                &*format!("x debian a 1 https://r/x sha512:{H512}"),
                "cannot be a preset's first line",
            ),
            (&*format!("x npm a 1 https://r/x md5:{H512}"), "not sha512"),
            ("x npm a 1 https://r/x sha256:abc", "64 lowercase hex"),
            (&*format!("x npm a 1 https://r/x {H512}"), "not sha512"),
            (
                &*format!("x npm a 1 https://r/x sha512:{}", H512.to_uppercase()),
                "128 lowercase hex",
            ),
            (
                &*format!("x npm a 1/2 https://r/x sha512:{H512}"),
                "image tag",
            ),
            (&*format!("X_y npm a 1 https://r/x sha512:{H512}"), "preset"),
        ];
        let deb = format!(
            "x npm a 1 https://r/a.tgz sha512:{H512}\nx debian b 3.11.2-6+deb12u9 https://r/b_3.11.2-6+deb12u9_amd64.deb sha512:{H512}\n"
        );
        assert_eq!(
            parse_lock(&deb).expect("a debian line after the CLI")[1].version,
            "3.11.2-6+deb12u9"
        );
        for (line, want) in cases {
            let e = parse_lock(&format!("# head\n{line}\n")).expect_err(line);
            assert_eq!(e.line, 2, "{line}");
            let shown = e.to_string();
            assert!(
                shown.starts_with("images/agents/packages.lock:2: "),
                "{shown}"
            );
            assert!(shown.contains(want), "{line}: {shown}");
        }
    }
}
