//! The attributes the tool reads: `#[cfg(test)]` (code left out of the graph) and
//! `#[path = ".."]` (a module's file).

use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Lit, Meta, Token};

/// Whether these attributes make the item exist only under `cfg(test)`: `cfg(test)`,
/// or `cfg(all(.., test, ..))`, or `cfg(any(..))` whose every branch needs `test`.
pub fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .filter_map(|a| a.parse_args::<Meta>().ok())
        .any(|m| needs_test(&m))
}

fn needs_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::NameValue(_) => false,
        Meta::List(list) => {
            let Ok(inner) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            else {
                return false;
            };
            if list.path.is_ident("all") {
                inner.iter().any(needs_test)
            } else if list.path.is_ident("any") {
                !inner.is_empty() && inner.iter().all(needs_test)
            } else {
                false
            }
        }
    }
}

/// The string of a `#[path = "..."]` attribute, if there is one.
pub fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(e) => match &e.lit {
                Lit::Str(s) => Some(s.value()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(src: &str) -> Vec<Attribute> {
        let item: syn::ItemMod = syn::parse_str(&format!("{src} mod m;")).expect("parses");
        item.attrs
    }

    #[test]
    fn cfg_test_forms() {
        assert!(is_test_only(&attrs("#[cfg(test)]")));
        assert!(is_test_only(&attrs("#[cfg(all(test, feature = \"x\"))]")));
        assert!(is_test_only(&attrs("#[cfg(any(test, all(test, unix)))]")));
        assert!(!is_test_only(&attrs("#[cfg(any(test, feature = \"x\"))]")));
        assert!(!is_test_only(&attrs("#[cfg(not(test))]")));
        assert!(!is_test_only(&attrs("#[cfg(unix)] #[allow(dead_code)]")));
    }

    #[test]
    fn path_attribute() {
        assert_eq!(
            path_attr(&attrs("#[path = \"a/b.rs\"]")).as_deref(),
            Some("a/b.rs")
        );
        assert_eq!(path_attr(&attrs("#[doc = \"x\"]")), None);
    }
}
