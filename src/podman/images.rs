//! Images: looking one up by reference and building one.

use std::path::Path;
use std::time::Duration;

use super::{HINT, PODMAN_QUERY_DEADLINE, Podman, PodmanError, Result, check_name};
use crate::process::{self, ProcessError};

impl Podman {
    /// The id of local image `reference` (`podman image inspect --format {{.Id}}`): running by
    /// id pins the image for the call. Never pulls.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (the image is missing: `cyclix images build` builds it),
    /// [`PodmanError::Output`].
    pub fn image_id(&self, reference: &str) -> Result<String> {
        check_name("image reference", reference)?;
        let action = || {
            format!(
                "looking up the id of image {reference} (missing? `cyclix images build` builds it)"
            )
        };
        let out = self.run(
            &["image", "inspect", "--format", "{{.Id}}", "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            action,
        )?;
        let id = out.stdout.trim();
        if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(id.to_string())
        } else {
            Err(PodmanError::Output {
                action: action(),
                detail: format!("not an image id: {id:?}"),
            })
        }
    }

    /// The value of label `key` on local image `reference`, `None` when the image is missing or
    /// has no such label (`podman image inspect --format {{index .Config.Labels KEY}}`). Never
    /// pulls.
    ///
    /// # Errors
    /// [`PodmanError::Command`] when podman fails for another reason than a missing image.
    pub fn image_label(&self, reference: &str, key: &str) -> Result<Option<String>> {
        check_name("image reference", reference)?;
        if !self.image_exists(reference)? {
            return Ok(None);
        }
        let format = format!("{{{{index .Config.Labels {key:?}}}}}");
        let out = self.run(
            &["image", "inspect", "--format", &format, "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("reading label {key} of image {reference}"),
        )?;
        let value = out.stdout.trim();
        Ok((!value.is_empty() && value != "<no value>").then(|| value.to_string()))
    }

    /// Pulls `reference` into local storage (`podman pull --quiet -- REFERENCE`) within
    /// `deadline`, on the host's network: a build's pinned base (`NAME@sha256:…`, its content
    /// fixed by the digest) is pulled before the build, which itself has no route out.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (the registry refused or was not reached in time; stderr has
    /// podman's reason), [`PodmanError::BadName`].
    pub fn image_pull(&self, reference: &str, deadline: Duration) -> Result<()> {
        check_name("image reference", reference)?;
        self.run(
            &["pull", "--quiet", "--", reference],
            None,
            deadline,
            || format!("pulling image {reference}"),
        )?;
        Ok(())
    }

    /// Whether image `reference` is in local storage (`podman image exists`: exit 0 yes, 1 no).
    /// Never pulls.
    ///
    /// # Errors
    /// [`PodmanError::Command`] for any other exit (125: an invalid reference).
    pub fn image_exists(&self, reference: &str) -> Result<bool> {
        check_name("image reference", reference)?;
        let action = || format!("looking up image {reference}");
        let out = process::run_status(
            &self.bin,
            &["image", "exists", "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            HINT,
        )
        .map_err(|source| PodmanError::Command {
            action: action(),
            source,
        })?;
        match out.status.code() {
            Some(0) => Ok(true),
            // Missing: exit 1 and silent. Exit 1 with words is podman failing (measured after
            // a SIGKILL of the user manager: "invalid internal status, try resetting the pause
            // process with \"podman system migrate\"", exit 1), not a missing image.
            Some(1) if out.stderr.trim().is_empty() => Ok(false),
            _ => Err(PodmanError::Command {
                action: action(),
                source: ProcessError::Failed {
                    argv: format!("{} image exists -- {reference}", self.bin),
                    status: out.status,
                    stderr: out.stderr.trim().to_string(),
                    stdout: out.stdout,
                },
            }),
        }
    }

    /// Builds `containerfile` with `context_dir` as context and tags it `tag`
    /// (`podman build --pull=missing --quiet --tag TAG --file FILE CONTEXT`); returns the image
    /// id. `--pull=missing` pulls a base image only when it is not in local storage, so the same
    /// call works online and offline (the testbed imports its bases; a missing base offline fails
    /// with the registry's DNS error). `deadline` bounds the whole build.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (the build failed or ran past `deadline`; stderr has podman's
    /// reason), [`PodmanError::Output`] (no image id printed).
    pub fn build(
        &self,
        tag: &str,
        containerfile: &Path,
        context_dir: &Path,
        deadline: Duration,
    ) -> Result<String> {
        self.build_with_args(tag, containerfile, context_dir, &[], &[], deadline)
    }

    /// [`Podman::build`] with `--build-arg NAME=VALUE` for each of `build_args` and
    /// `--label KEY=VALUE` for each of `labels` (values are public facts such as a package's
    /// version and digest, never secrets: they are in argv and in the image's history).
    ///
    /// # Errors
    /// As [`Podman::build`].
    pub fn build_with_args(
        &self,
        tag: &str,
        containerfile: &Path,
        context_dir: &Path,
        build_args: &[(&str, &str)],
        labels: &[(&str, &str)],
        deadline: Duration,
    ) -> Result<String> {
        check_name("image tag", tag)?;
        let file = containerfile.to_string_lossy();
        let context = context_dir.to_string_lossy();
        let action = || {
            format!(
                "building image {tag} from {} (a base image that is not local must be \
                 pullable: `podman pull` it or load it first)",
                containerfile.display()
            )
        };
        let pairs: Vec<String> = build_args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let label_pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut argv = vec![
            "build",
            "--pull=missing",
            "--quiet",
            "--tag",
            tag,
            "--file",
            &file,
        ];
        for pair in &pairs {
            argv.extend(["--build-arg", pair.as_str()]);
        }
        for pair in &label_pairs {
            argv.extend(["--label", pair.as_str()]);
        }
        argv.extend(["--", &context]);
        let out = self.run(&argv, None, deadline, action)?;
        out.stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
            .ok_or_else(|| PodmanError::Output {
                action: action(),
                detail: "no image id on stdout".into(),
            })
    }
}
