//! A generic TLV tree of any packet stream, with type names by context: the
//! basis of `granary dissect`.

use bytes::Bytes;

use crate::error::Result;
use crate::tlv::{Reader, MAX_DEPTH};
use crate::types::*;

/// One element of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// TLV-TYPE.
    pub typ: u64,
    /// Offset of the element in the input.
    pub offset: usize,
    /// Size of TLV-TYPE + TLV-LENGTH.
    pub header_len: usize,
    /// TLV-LENGTH.
    pub length: usize,
    /// The TLV-VALUE.
    pub value: Bytes,
    /// Children, for elements known to nest TLVs whose value parsed as TLVs.
    pub children: Option<Vec<Node>>,
    /// Why a nested element could not be expanded.
    pub error: Option<String>,
    /// Context the element appeared in (parent type; 0 at top level).
    pub parent: u64,
}

impl Node {
    /// The element's name in its context.
    pub fn name(&self) -> &'static str {
        if self.parent == NAME || self.parent == FINAL_BLOCK_ID {
            return match self.typ {
                COMP_IMPLICIT_DIGEST | COMP_PARAMS_DIGEST | COMP_GENERIC | COMP_KEYWORD
                | COMP_SEGMENT | COMP_BYTE_OFFSET | COMP_VERSION | COMP_TIMESTAMP
                | COMP_SEQUENCE_NUM => type_name(self.typ),
                _ => "NameComponent",
            };
        }
        type_name(self.typ)
    }
}

fn nests(parent: u64, typ: u64) -> bool {
    match typ {
        INTEREST
        | DATA
        | NAME
        | META_INFO
        | SIGNATURE_INFO
        | KEY_LOCATOR
        | FORWARDING_HINT
        | INTEREST_SIGNATURE_INFO
        | VALIDITY_PERIOD
        | LP_PACKET
        | FINAL_BLOCK_ID => parent != NAME,
        LP_NACK | LP_CACHE_POLICY | LP_FRAGMENT => parent == LP_PACKET,
        _ => false,
    }
}

/// Parses every top-level TLV in `buf`. Fails only when the top level itself
/// is not a sequence of well-formed TLVs; nested failures are recorded in
/// the node's `error`.
pub fn parse(buf: &Bytes) -> Result<Vec<Node>> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while !r.is_empty() {
        let el = r.read()?;
        out.push(node(&r, &el, 0, 0));
    }
    Ok(out)
}

fn node(r: &Reader<'_>, el: &crate::tlv::Element, parent: u64, depth: usize) -> Node {
    let mut n = Node {
        typ: el.typ,
        offset: el.start,
        header_len: el.value_start - el.start,
        length: el.value_len(),
        value: r.value(el),
        children: None,
        error: None,
        parent,
    };
    if !nests(parent, el.typ) {
        return n;
    }
    if depth >= MAX_DEPTH {
        n.error = Some("nested too deeply".into());
        return n;
    }
    let mut inner = Reader::inside(r.buffer(), el);
    let mut kids = Vec::new();
    while !inner.is_empty() {
        match inner.read() {
            Ok(c) => kids.push(node(&inner, &c, el.typ, depth + 1)),
            Err(e) => {
                // A Fragment holding a piece of a packet is not a TLV sequence.
                if el.typ != LP_FRAGMENT || !kids.is_empty() {
                    n.error = Some(e.to_string());
                }
                if el.typ == LP_FRAGMENT && kids.is_empty() {
                    return n;
                }
                break;
            }
        }
    }
    n.children = Some(kids);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_names_in_context() {
        let d = crate::DataBuilder::new(crate::Name::from_uri("/a/seg=2/33=x").unwrap())
            .content(&b"hi"[..])
            .encode_with_signature(Bytes::from_static(&[0; 4]));
        let t = parse(d.wire()).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name(), "Data");
        let name = &t[0].children.as_ref().unwrap()[0];
        let comps: Vec<&str> = name
            .children
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name())
            .collect();
        assert_eq!(
            comps,
            [
                "GenericNameComponent",
                "SegmentNameComponent",
                "NameComponent"
            ]
        );
    }

    #[test]
    fn broken_nested_is_recorded_not_fatal() {
        let w = Bytes::from_static(&[6, 4, 7, 2, 8, 5]);
        let t = parse(&w).unwrap();
        assert!(t[0].children.as_ref().unwrap()[0].error.is_some());
        assert!(parse(&Bytes::from_static(&[6, 9])).is_err());
    }
}
