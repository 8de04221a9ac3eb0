//! What a locked (name, version) cannot take: [`Incompatibility`].

use std::fmt;

/// One change a locked (name, version) cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Incompatibility {
    /// The event name.
    pub name: String,
    /// The version.
    pub version: u32,
    /// Where in the payload, as a JSON pointer (`/customer/email`; empty:
    /// the payload itself).
    pub path: String,
    /// What changed.
    pub kind: IncompatibleKind,
}

/// What kind of change an [`Incompatibility`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IncompatibleKind {
    /// A field of the locked schema is gone.
    FieldRemoved,
    /// A required field was added (or an optional one made required).
    RequiredFieldAdded,
    /// A required field was made optional.
    RequiredFieldMadeOptional,
    /// A field was added to a type that rejects unknown fields.
    FieldAddedToClosedType,
    /// The type changed (`from` and `to`, as JSON Schema text).
    TypeChanged {
        /// The locked schema's part.
        from: String,
        /// The current one.
        to: String,
    },
    /// The (name, version) is locked but no longer registered.
    VersionUnregistered,
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, version) = (&self.name, self.version);
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" `{}`", self.path)
        };
        match &self.kind {
            IncompatibleKind::FieldRemoved => write!(f, "`{name}` v{version}: field{at} removed"),
            IncompatibleKind::RequiredFieldAdded => {
                write!(f, "`{name}` v{version}: required field{at} added")
            }
            IncompatibleKind::RequiredFieldMadeOptional => {
                write!(f, "`{name}` v{version}: required field{at} made optional")
            }
            IncompatibleKind::FieldAddedToClosedType => write!(
                f,
                "`{name}` v{version}: field{at} added to a type that rejects unknown fields"
            ),
            IncompatibleKind::TypeChanged { from, to } => {
                write!(
                    f,
                    "`{name}` v{version}: type of{at} changed from {from} to {to}"
                )
            }
            IncompatibleKind::VersionUnregistered => write!(
                f,
                "`{name}` v{version} is locked but no longer registered: its messages cannot be \
                 decoded"
            ),
        }
    }
}
