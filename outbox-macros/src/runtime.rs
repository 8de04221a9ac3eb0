//! Which crate the generated code names: the facade `txoutbox` by default,
//! the path given with `crate = "..."` when there is one, and the runtime's
//! own crates (which the facade depends on, so they cannot name it) when the
//! derive is used inside one of them.

use syn::{Path, parse_quote};

/// The packages the facade is made of: inside them (their tests and doc
/// examples), the generated code names `txoutbox_core` and
/// `txoutbox_sea_orm` directly.
const RUNTIME_PACKAGES: [&str; 4] = [
    "txoutbox-core",
    "txoutbox-sea-orm",
    "txoutbox-nats",
    "txoutbox-testing",
];

/// The paths generated code goes through: `core` for the event model
/// (`<core>::__private::IntegrationEvent`, ...), `entity` for the SeaORM
/// items of `#[aggregate(entity = ...)]`.
pub(crate) struct Runtime {
    /// Holds `__private` with the event model's items.
    pub(crate) core: Path,
    /// Holds `__private` with `AggregateEntity`, `EntityTrait` and
    /// `IntoActiveModel`.
    pub(crate) entity: Path,
}

/// The runtime for a derive whose `crate = ...` key gave `krate`.
pub(crate) fn runtime(krate: Option<Path>) -> Runtime {
    if let Some(krate) = krate {
        return Runtime {
            core: krate.clone(),
            entity: krate,
        };
    }
    // Cargo sets CARGO_PKG_NAME for every compilation of a package,
    // doc examples included.
    let inside_runtime = std::env::var("CARGO_PKG_NAME")
        .is_ok_and(|package| RUNTIME_PACKAGES.contains(&package.as_str()));
    if inside_runtime {
        Runtime {
            core: parse_quote!(::txoutbox_core),
            entity: parse_quote!(::txoutbox_sea_orm),
        }
    } else {
        Runtime {
            core: parse_quote!(::txoutbox),
            entity: parse_quote!(::txoutbox),
        }
    }
}
