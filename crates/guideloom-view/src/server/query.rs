//! A request's query string, percent-decoded.

use super::reply::Fail;

/// A request's query parameters, percent-decoded (`+` is a space).
#[derive(Debug, Default)]
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn parse(query: &str) -> Self {
        Query(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first non-empty value of `key`.
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// Every non-empty value of `key`, in order.
    pub(super) fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `key` as a whole number (`400` when it is not one).
    pub(super) fn number(&self, key: &str) -> Result<Option<u64>, Fail> {
        self.get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| Fail::bad(format!("{key}={v:?} is not a whole number")))
            })
            .transpose()
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_decoded() {
        let q = Query::parse("snapshot=v%22%3E1&set=q%2Fv1&set=&page=2&x=a+b&bad=%zz%4&u=%\u{e9}");
        assert_eq!(q.get("snapshot"), Some("v\">1"));
        assert_eq!(q.all("set"), ["q/v1"]);
        assert_eq!(q.number("page").unwrap(), Some(2));
        assert_eq!(q.get("x"), Some("a b"));
        assert_eq!(q.get("bad"), Some("%zz%4"));
        assert_eq!(q.get("u"), Some("%\u{e9}"));
        assert!(q.number("x").is_err());
    }
}
