//! Paths inside macro invocations (`format!("{}", crate::a::f())`, `$crate::b::X` in a
//! `macro_rules!`), which `syn` leaves as unparsed tokens: every `ident::ident..`
//! sequence of two or more segments that does not itself follow a `::` or a `.`.

use proc_macro2::{Spacing, TokenStream, TokenTree};

use crate::tree::unraw;

/// A path found in tokens: its segments and the line of its first segment.
pub type TokenPath = (Vec<String>, usize);

pub fn paths_in_tokens(tokens: TokenStream, out: &mut Vec<TokenPath>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(group) => paths_in_tokens(group.stream(), out),
            TokenTree::Ident(ident) if !follows_path_or_dot(&tokens, i) => {
                let mut segments = vec![unraw(&ident.to_string())];
                let line = ident.span().start().line;
                while let Some(next) = segment_after(&tokens, i) {
                    segments.push(next);
                    i += 3;
                }
                if segments.len() > 1 {
                    out.push((segments, line));
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// The identifier after `::` following token `i`, if tokens `i+1..=i+3` are `::ident`.
fn segment_after(tokens: &[TokenTree], i: usize) -> Option<String> {
    match tokens.get(i + 1..i + 4)? {
        [TokenTree::Punct(a), TokenTree::Punct(b), TokenTree::Ident(ident)]
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':' =>
        {
            Some(unraw(&ident.to_string()))
        }
        _ => None,
    }
}

/// Token `i` continues a path (`a::i`) or is a field or method (`x.i`).
fn follows_path_or_dot(tokens: &[TokenTree], i: usize) -> bool {
    i > 0
        && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':' || p.as_char() == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(src: &str) -> Vec<String> {
        let mut out = Vec::new();
        paths_in_tokens(src.parse().expect("tokens"), &mut out);
        out.into_iter().map(|(s, _)| s.join("::")).collect()
    }

    #[test]
    fn finds_paths_in_nested_groups() {
        assert_eq!(
            paths("\"{}\", crate::a::f(x.y::z), { $crate::b::X }"),
            ["crate::a::f", "crate::b::X"]
        );
    }

    #[test]
    fn skips_single_idents_fields_and_extern_paths() {
        let found = paths("a, b.c, ::std::mem, x.y");
        assert!(found.is_empty(), "{found:?}");
    }
}
