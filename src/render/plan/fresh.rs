//! Nothing shared between runs (issue 15, item 5): the variables that put the agent's and the
//! gate's home, XDG directories and temporary files on the container's own `/tmp` tmpfs
//! ([`super::tmpfs_tmp`], gone with the container), and the common telemetry switches off.
//! One list each, applied to the agent and the gate (the baseline runs in the agent's
//! container, so it has them too). Pure.

/// Home, XDG base directories (XDG Base Directory Specification 0.8) and `TMPDIR` (POSIX
/// `tmpdir`), all below the container's `/tmp` tmpfs: whatever a tool caches or configures
/// there dies with the run's container.
pub const FRESH_DIRS: &[(&str, &str)] = &[
    ("HOME", "/tmp"),
    ("TMPDIR", "/tmp"),
    ("XDG_CACHE_HOME", "/tmp/.cache"),
    ("XDG_CONFIG_HOME", "/tmp/.config"),
    ("XDG_DATA_HOME", "/tmp/.local/share"),
    ("XDG_STATE_HOME", "/tmp/.local/state"),
];

/// Telemetry off, each switch as its tool documents it:
/// - `DO_NOT_TRACK=1`: the cross-tool convention (consoledonottrack.com), read by many CLIs
///   (Gatsby, Astro, Nuxt, Deno's, Turborepo, …).
/// - `NEXT_TELEMETRY_DISABLED=1`: Next.js (nextjs.org/telemetry).
/// - `DOTNET_CLI_TELEMETRY_OPTOUT=1`: the .NET SDK (learn.microsoft.com/dotnet/core/tools/telemetry).
/// - `HF_HUB_DISABLE_TELEMETRY=1`: `huggingface_hub` (its "Environment variables" reference).
/// - `GATSBY_TELEMETRY_DISABLED=1`: Gatsby (gatsbyjs.com/docs/telemetry).
/// - `NUXT_TELEMETRY_DISABLED=1`: Nuxt (`@nuxt/telemetry` README, "Opting-out").
/// - `ASTRO_TELEMETRY_DISABLED=1`: Astro (astro.build/telemetry, `@astrojs/telemetry`).
/// - `TURBO_TELEMETRY_DISABLED=1`: Turborepo (turbo.build/repo/docs/telemetry).
/// - `CHECKPOINT_DISABLE=1`: `HashiCorp` tools' update/telemetry check (Terraform, Packer).
/// - `SAM_CLI_TELEMETRY=0`: the AWS SAM CLI.
/// - `HOMEBREW_NO_ANALYTICS=1`: Homebrew (docs.brew.sh/Analytics).
/// - `VCPKG_DISABLE_METRICS=1`: vcpkg.
/// - `NG_CLI_ANALYTICS=false`: the Angular CLI (angular.dev/cli/analytics).
/// - `POWERSHELL_TELEMETRY_OPTOUT=1`: `PowerShell` (`about_Telemetry`).
/// - `AZURE_CORE_COLLECT_TELEMETRY=false`: the Azure CLI.
/// - `STORYBOOK_DISABLE_TELEMETRY=1`: Storybook (storybook.js.org/docs/configure/telemetry).
///
/// A tool of the project's own that phones home past these still goes through the egress
/// proxy, which denies any host not on `egress.allow`.
pub const TELEMETRY_OFF: &[(&str, &str)] = &[
    ("DO_NOT_TRACK", "1"),
    ("NEXT_TELEMETRY_DISABLED", "1"),
    ("DOTNET_CLI_TELEMETRY_OPTOUT", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("GATSBY_TELEMETRY_DISABLED", "1"),
    ("NUXT_TELEMETRY_DISABLED", "1"),
    ("ASTRO_TELEMETRY_DISABLED", "1"),
    ("TURBO_TELEMETRY_DISABLED", "1"),
    ("CHECKPOINT_DISABLE", "1"),
    ("SAM_CLI_TELEMETRY", "0"),
    ("HOMEBREW_NO_ANALYTICS", "1"),
    ("VCPKG_DISABLE_METRICS", "1"),
    ("NG_CLI_ANALYTICS", "false"),
    ("POWERSHELL_TELEMETRY_OPTOUT", "1"),
    ("AZURE_CORE_COLLECT_TELEMETRY", "false"),
    ("STORYBOOK_DISABLE_TELEMETRY", "1"),
];

/// [`FRESH_DIRS`] then [`TELEMETRY_OFF`], as owned pairs for a container's environment.
#[must_use]
pub fn fresh_env() -> Vec<(String, String)> {
    FRESH_DIRS
        .iter()
        .chain(TELEMETRY_OFF)
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_directory_is_on_the_tmpfs_and_no_name_repeats() {
        for (k, v) in FRESH_DIRS {
            assert!(*v == "/tmp" || v.starts_with("/tmp/"), "{k}={v}");
        }
        let mut names: Vec<&str> = FRESH_DIRS
            .iter()
            .chain(TELEMETRY_OFF)
            .map(|(k, _)| *k)
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a variable is set twice");
    }

    #[test]
    fn no_preset_sets_a_directory_of_the_one_list() {
        for name in crate::agents::PRESETS {
            let Some(p) = crate::agents::presets::find(name) else {
                continue;
            };
            for (k, _) in p.env {
                assert!(
                    !FRESH_DIRS.iter().chain(TELEMETRY_OFF).any(|(f, _)| f == k),
                    "preset {name} sets {k}, which the one list sets"
                );
            }
        }
    }
}
