//! The `.npy` header: a Python dict literal with exactly the keys `descr` (a string),
//! `fortran_order` (`True` or `False`) and `shape` (a tuple of non-negative integers), parsed as
//! strictly as NumPy's own reader (`ast.literal_eval`, then its key and type checks): a missing,
//! unknown or repeated key, a `fortran_order` that is not a bool and a shape that is not a tuple
//! (`(3)` is the integer 3; a one-element tuple is `(3,)`) are errors naming the key.

/// The three fields of a header.
#[derive(Debug, PartialEq)]
pub(super) struct Header {
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
}

/// One value of the dict.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    Other(String),
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Consumes `c` (after whitespace) if it comes next.
    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// A quoted string without escapes (NumPy writes none; a backslash is refused).
    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let rest = self.rest();
        let quote = rest
            .chars()
            .next()
            .filter(|&c| c == '\'' || c == '"')
            .ok_or_else(|| format!("expected a quoted string at `{}`", shown(rest)))?;
        let body = &rest[1..];
        let end = body
            .find(quote)
            .ok_or_else(|| format!("unterminated string at `{}`", shown(rest)))?;
        let s = &body[..end];
        if s.contains('\\') {
            return Err(format!(
                "escapes in string `{}` are not supported",
                shown(s)
            ));
        }
        self.at += end + 2;
        Ok(s.to_string())
    }

    /// A string, `True`/`False`, a tuple of integers, or (for the message) the raw text of
    /// anything else up to the next top-level comma or the closing brace.
    fn value(&mut self) -> Result<Value, String> {
        self.skip_ws();
        let rest = self.rest();
        if rest.starts_with('\'') || rest.starts_with('"') {
            return self.string().map(Value::Str);
        }
        for (word, b) in [("True", true), ("False", false)] {
            if let Some(after) = rest.strip_prefix(word) {
                if !after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                    self.at += word.len();
                    return Ok(Value::Bool(b));
                }
            }
        }
        if rest.starts_with('(') {
            if let Some(t) = self.tuple()? {
                return Ok(Value::Tuple(t));
            }
        }
        let mut depth = 0i32;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' if depth > 0 => depth -= 1,
                    ',' | '}' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .map_or(rest.len(), |(i, _)| i);
        self.at += end;
        Ok(Value::Other(rest[..end].trim().to_string()))
    }

    /// `(` integers separated by commas `)`, where one element needs a trailing comma; `None`
    /// (cursor unmoved) when the parenthesised text is not such a tuple.
    fn tuple(&mut self) -> Result<Option<Vec<usize>>, String> {
        let start = self.at;
        self.at += 1;
        let mut dims = Vec::new();
        let mut trailing_comma = false;
        loop {
            if self.eat(')') {
                break;
            }
            self.skip_ws();
            let rest = self.rest();
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                self.at = start;
                return Ok(None);
            }
            let d = rest[..digits]
                .parse::<usize>()
                .map_err(|_| format!("shape entry {} is too large", shown(&rest[..digits])))?;
            dims.push(d);
            self.at += digits;
            trailing_comma = self.eat(',');
            if !trailing_comma && !self.rest().trim_start().starts_with(')') {
                self.at = start;
                return Ok(None);
            }
        }
        if dims.len() == 1 && !trailing_comma {
            // `(3)` is the integer 3 to Python, not a tuple
            self.at = start;
            return Ok(None);
        }
        Ok(Some(dims))
    }
}

/// At most 40 characters of `s`, for messages.
fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

const KEYS: [&str; 3] = ["descr", "fortran_order", "shape"];

/// Parses the header text (see the module docs); an error names the key at fault.
pub(super) fn parse(text: &str) -> Result<Header, String> {
    let mut c = Cursor { text, at: 0 };
    if !c.eat('{') {
        return Err(format!(
            "header is not a Python dict: `{}`",
            shown(text.trim())
        ));
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if c.eat('}') {
            break;
        }
        let key = c.string().map_err(|e| format!("header key: {e}"))?;
        if !c.eat(':') {
            return Err(format!("header key '{key}' has no `:` and value"));
        }
        let value = c.value()?;
        let slot_taken = match key.as_str() {
            "descr" => descr.replace(value).is_some(),
            "fortran_order" => fortran.replace(value).is_some(),
            "shape" => shape.replace(value).is_some(),
            _ => {
                return Err(format!(
                    "header has key '{key}'; a .npy header has exactly 'descr', \
                     'fortran_order' and 'shape'"
                ))
            }
        };
        if slot_taken {
            return Err(format!(
                "header key '{key}' appears twice (NumPy would silently take the last)"
            ));
        }
        if !c.eat(',') {
            if c.eat('}') {
                break;
            }
            return Err(format!(
                "header: expected `,` or `}}` after key '{key}' at `{}`",
                shown(c.rest())
            ));
        }
    }
    if !c.rest().trim().is_empty() {
        return Err(format!(
            "header has text after its dict: `{}`",
            shown(c.rest().trim())
        ));
    }
    let missing = |k: &str| format!("header has no '{k}' (it needs {KEYS:?})");
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        Value::Str(s) => s,
        Value::Other(t) => {
            return Err(format!(
                "header 'descr' is `{}`: only a plain dtype string is supported",
                shown(&t)
            ))
        }
        _ => return Err("header 'descr' is not a dtype string".into()),
    };
    let fortran_order = match fortran.ok_or_else(|| missing("fortran_order"))? {
        Value::Bool(b) => b,
        Value::Str(s) => {
            return Err(format!(
                "header 'fortran_order' is the string '{}', not True or False",
                shown(&s)
            ))
        }
        Value::Other(t) => {
            return Err(format!(
                "header 'fortran_order' is `{}`, not True or False",
                shown(&t)
            ))
        }
        Value::Tuple(_) => {
            return Err("header 'fortran_order' is a tuple, not True or False".into())
        }
    };
    let shape = match shape.ok_or_else(|| missing("shape"))? {
        Value::Tuple(t) => t,
        Value::Other(t) => {
            return Err(format!(
                "header 'shape' is `{}`, not a tuple of non-negative integers (one dimension \
                 is written `(n,)`)",
                shown(&t)
            ))
        }
        _ => return Err("header 'shape' is not a tuple of non-negative integers".into()),
    };
    Ok(Header {
        descr,
        fortran_order,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Header {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(h) => panic!("{text}: accepted as {h:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn reads_the_headers_numpy_writes() {
        let h = ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n");
        assert_eq!(
            h,
            Header {
                descr: "<f4".into(),
                fortran_order: false,
                shape: vec![2, 3]
            }
        );
        assert_eq!(
            ok("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }").shape,
            [5]
        );
        assert_eq!(
            ok("{'shape': (), 'descr': \"<f4\", 'fortran_order': True}").shape,
            [0; 0]
        );
        assert!(ok("{'descr':'<f4','fortran_order':True,'shape':(1,2,)}").fortran_order);
    }

    #[test]
    fn what_numpy_refuses_is_refused_naming_the_key() {
        let e = err("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }");
        assert!(e.contains("'fortran_order'") && e.contains("'no'"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }");
        assert!(e.contains("'fortran_order'"), "{e}");
        let e = err("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }");
        assert!(e.contains("'descr' appears twice"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (3,)}");
        assert!(e.contains("'shape' appears twice"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}");
        assert!(e.contains("'x'"), "{e}");
        let e = err("{'descr': '<f4', 'shape': (2,), }");
        assert!(e.contains("no 'fortran_order'"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }");
        assert!(e.contains("'shape'") && e.contains("(n,)"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }");
        assert!(e.contains("'shape'"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }");
        assert!(e.contains("'shape'"), "{e}");
        let e = err("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }");
        assert!(e.contains("'descr'"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } extra");
        assert!(e.contains("after its dict"), "{e}");
        assert!(err("'descr': '<f4'").contains("not a Python dict"));
        assert!(err("{'descr' '<f4'}").contains("'descr'"));
        assert!(err("{'descr': '<f4").contains("unterminated"));
        let big = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}";
        assert!(err(big).contains("too large"));
    }
}
