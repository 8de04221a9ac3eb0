//! Parsing `#[event(...)]`.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{DeriveInput, Lit, LitStr, Path, Type};

// The rules outbox-core checks at start-up (`outbox-naming`, shared), so the
// two checks can never disagree.
use txoutbox_naming::{check_event_name, check_subject};

const KEYS: &str = "`name`, `version`, `subject`, `upcast_from`, `crate`";

/// The parsed, validated `#[event(...)]` attributes of one type.
pub(crate) struct EventAttrs {
    pub(crate) name: LitStr,
    pub(crate) version: u32,
    pub(crate) version_span: Span,
    pub(crate) subject: Option<LitStr>,
    pub(crate) upcast_from: Option<Type>,
    pub(crate) krate: Option<Path>,
}

#[derive(Default)]
struct Collected {
    name: Option<LitStr>,
    version: Option<(u32, Span)>,
    subject: Option<LitStr>,
    upcast_from: Option<Type>,
    krate: Option<Path>,
}

pub(crate) fn parse(input: &DeriveInput) -> syn::Result<EventAttrs> {
    let mut collected = Collected::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("event")) {
        attr.parse_nested_meta(|meta| parse_key(&meta, &mut collected))?;
    }
    let Some(name) = collected.name else {
        return Err(syn::Error::new(
            input.ident.span(),
            "missing `#[event(name = \"...\")]`: the wire name is the event's contract \
             and is never derived from the Rust type name",
        ));
    };
    let (version, version_span) = collected.version.unwrap_or((1, name.span()));
    Ok(EventAttrs {
        name,
        version,
        version_span,
        subject: collected.subject,
        upcast_from: collected.upcast_from,
        krate: collected.krate,
    })
}

fn parse_key(meta: &ParseNestedMeta<'_>, out: &mut Collected) -> syn::Result<()> {
    match key_of(meta).as_str() {
        "name" => {
            let lit = string_value(meta, "name = \"order.placed\"")?;
            check_event_name(&lit.value()).map_err(|reason| {
                syn::Error::new(lit.span(), format!("invalid event name: it {reason}"))
            })?;
            set_once(meta, &mut out.name, lit)
        }
        "version" => {
            let version = version_value(meta)?;
            set_once(meta, &mut out.version, version)
        }
        "subject" => {
            let lit = string_value(meta, "subject = \"orders.placed\"")?;
            check_subject(&lit.value()).map_err(|reason| {
                syn::Error::new(lit.span(), format!("invalid subject: it {reason}"))
            })?;
            set_once(meta, &mut out.subject, lit)
        }
        "upcast_from" => {
            let ty = meta.value()?.parse::<Type>().map_err(|err| {
                syn::Error::new(
                    err.span(),
                    "expected the previous version's type, unquoted, \
                     e.g. `upcast_from = OrderPlacedV1`",
                )
            })?;
            set_once(meta, &mut out.upcast_from, ty)
        }
        "crate" => {
            let lit = string_value(meta, "crate = \"my_crate::txoutbox\"")?;
            let path = lit.parse::<Path>()?;
            set_once(meta, &mut out.krate, path)
        }
        _ => Err(meta.error(format!(
            "unknown `event` attribute key; expected one of {KEYS}"
        ))),
    }
}

pub(crate) fn set_once<T>(
    meta: &ParseNestedMeta<'_>,
    slot: &mut Option<T>,
    value: T,
) -> syn::Result<()> {
    if slot.is_some() {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        return Err(syn::Error::new(
            meta.path.span(),
            format!("duplicate `{key}` key"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

pub(crate) fn string_value(meta: &ParseNestedMeta<'_>, example: &str) -> syn::Result<LitStr> {
    match meta.value()?.parse::<Lit>()? {
        Lit::Str(lit) => Ok(lit),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected a string literal, e.g. `{example}`"),
        )),
    }
}

fn version_value(meta: &ParseNestedMeta<'_>) -> syn::Result<(u32, Span)> {
    match meta.value()?.parse::<Lit>()? {
        Lit::Int(lit) => {
            let version: u32 = lit.base10_parse().map_err(|_| {
                syn::Error::new(
                    lit.span(),
                    format!("event versions are integers from 1 to {}", u32::MAX),
                )
            })?;
            if version == 0 {
                return Err(syn::Error::new(lit.span(), "event versions start at 1"));
            }
            Ok((version, lit.span()))
        }
        other => Err(syn::Error::new(
            other.span(),
            "expected an integer literal, e.g. `version = 2`",
        )),
    }
}

/// The attribute key `meta` names (`name` in `name = "..."`), empty when it
/// is a path of several segments.
pub(crate) fn key_of(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default()
}
