//! Start-up checks of a set of registrations.

use std::collections::{BTreeMap, HashMap};

use super::error::RegistryError;
use super::registration::EventRegistration;
use crate::naming::{validate_event_name, validate_subject};
use crate::subject::EventSubject;

/// Checks each registration, then that no (name, version) is claimed twice,
/// then every upcast chain. Returns the first problem found.
///
/// The builder adds every upcast source along with the type that names it, so
/// a chain never leads outside `registrations`.
pub(super) fn validate(registrations: &[EventRegistration]) -> Result<(), RegistryError> {
    registrations.iter().try_for_each(check_one)?;
    check_duplicates(registrations)?;
    registrations.iter().try_for_each(check_upcast)?;
    check_reachability(registrations)
}

fn check_one(registration: &EventRegistration) -> Result<(), RegistryError> {
    let rust_type = registration.rust_type();
    let invalid = |source| RegistryError::InvalidName { rust_type, source };
    validate_event_name(registration.name()).map_err(invalid)?;
    if let EventSubject::Fixed(subject) = registration.subject() {
        validate_subject(subject).map_err(invalid)?;
    }
    if registration.version() == 0 {
        return Err(RegistryError::ZeroVersion {
            rust_type,
            name: registration.name(),
        });
    }
    Ok(())
}

fn check_duplicates(registrations: &[EventRegistration]) -> Result<(), RegistryError> {
    let mut claimed: HashMap<(&str, u32), &EventRegistration> = HashMap::new();
    for registration in registrations {
        let key = (registration.name(), registration.version());
        if let Some(first) = claimed.insert(key, registration) {
            let mut types = [first.rust_type(), registration.rust_type()];
            types.sort_unstable();
            return Err(RegistryError::DuplicateEvent {
                name: registration.name(),
                version: registration.version(),
                first: types[0],
                second: types[1],
            });
        }
    }
    Ok(())
}

fn check_upcast(registration: &EventRegistration) -> Result<(), RegistryError> {
    // Follow the chain first, so a cycle is reported as a cycle rather than
    // as whichever version rule it happens to break.
    let mut chain = vec![*registration];
    let mut current = *registration;
    while let Some(source) = current.upcasts_from() {
        if let Some(start) = chain.iter().position(|r| r.type_id() == source.type_id()) {
            let mut cycle: Vec<String> = chain[start..].iter().map(|r| r.describe()).collect();
            cycle.push(source.describe());
            return Err(RegistryError::UpcastCycle { chain: cycle });
        }
        chain.push(source);
        current = source;
    }

    let Some(source) = registration.upcasts_from() else {
        return Ok(());
    };
    if source.name() != registration.name() {
        return Err(RegistryError::UpcastNameMismatch {
            event: registration.describe(),
            source_event: source.describe(),
        });
    }
    let expected = registration.version() - 1;
    if source.version() != expected {
        return Err(RegistryError::UpcastGap {
            event: registration.describe(),
            source_version: source.version(),
            expected,
        });
    }
    Ok(())
}

/// Where the newest version of a name declares an upcast, its chain must
/// reach every registered version of that name, or a consumer of the newest
/// version would silently miss some messages.
fn check_reachability(registrations: &[EventRegistration]) -> Result<(), RegistryError> {
    let mut by_name: BTreeMap<&str, BTreeMap<u32, &EventRegistration>> = BTreeMap::new();
    for registration in registrations {
        by_name
            .entry(registration.name())
            .or_default()
            .insert(registration.version(), registration);
    }
    for (name, versions) in by_name {
        let Some((&newest, newest_registration)) = versions.last_key_value() else {
            continue;
        };
        if newest_registration.upcasts_from().is_none() {
            continue; // versions without upcasts are handled separately, by design
        }
        // Upcast checks passed, so the chain steps down one version at a time.
        let mut chain_end = newest;
        let mut current = **newest_registration;
        while let Some(source) = current.upcasts_from() {
            chain_end = source.version();
            current = source;
        }
        if let Some((&version, registration)) = versions.range(..chain_end).next_back() {
            return Err(RegistryError::UnreachableVersion {
                name,
                version,
                rust_type: registration.rust_type(),
                newest,
                chain_end,
                next: chain_end,
            });
        }
    }
    Ok(())
}
