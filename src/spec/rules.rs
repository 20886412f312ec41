//! Value rules shared by the sections: names, environment variables, hosts, durations,
//! sizes, calendar expressions, paths, command lines and images. Each returns a lowercase
//! message (or pushes a diagnostic) and knows nothing of which section uses it.

pub(crate) mod argv;
pub(crate) mod calendar;
pub(crate) mod durations;
pub(crate) mod env;
pub(crate) mod hosts;
pub(crate) mod images;
pub(crate) mod names;
pub(crate) mod paths;
pub(crate) mod sizes;

#[cfg(test)]
mod tests;
