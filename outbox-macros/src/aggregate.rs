//! `#[derive(AggregateRoot)]`: the struct's attributes, its fields, and the
//! generated impl, one file each.

mod attrs;
mod entity;
mod expand;
mod fields;

pub(crate) use expand::derive;
