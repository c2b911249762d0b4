//! A table of text cells, printed as an aligned text table, markdown, CSV or HTML.

use std::fmt::Write as _;

/// How `compare` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Columns padded to their widest cell, numbers right-aligned (as `runs list` prints).
    #[default]
    Table,
    /// GitHub-flavoured markdown, numbers right-aligned.
    Markdown,
    /// RFC 4180 CSV: a header line, then one line per row.
    Csv,
}

/// A table: a header and rows of cells, some columns right-aligned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Printed above the table (a markdown heading in markdown).
    pub title: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Which columns hold numbers (right-aligned); columns past its end are left-aligned.
    pub right: Vec<bool>,
}

impl Table {
    pub fn new(header: Vec<String>) -> Table {
        Table { title: None, header, rows: Vec::new(), right: Vec::new() }
    }

    pub fn with_title(mut self, title: impl Into<String>) -> Table {
        self.title = Some(title.into());
        self
    }

    fn is_right(&self, c: usize) -> bool {
        self.right.get(c).copied().unwrap_or(false)
    }

    /// The table in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Table => servebench_store::format::printable(&self.text()),
            Format::Markdown => servebench_store::format::printable(&self.markdown()),
            Format::Csv => self.csv(),
        }
    }

    /// The aligned text table: two spaces between columns, no trailing spaces.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(t) = &self.title {
            let _ = writeln!(out, "{t}");
        }
        let cols = self.header.len();
        let all = std::iter::once(&self.header).chain(&self.rows);
        let mut widths = vec![0; cols];
        for row in all.clone() {
            for (c, cell) in row.iter().enumerate().take(cols) {
                widths[c] = widths[c].max(cell.chars().count());
            }
        }
        for row in all {
            let mut line = String::new();
            for (c, width) in widths.iter().enumerate() {
                let cell = row.get(c).map_or("", String::as_str);
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(width - cell.chars().count());
                if self.is_right(c) {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// A markdown table, under a bold title line when there is one.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if let Some(t) = &self.title {
            let _ = writeln!(out, "**{}**\n", md_escape(t));
        }
        let line = |cells: &[String]| {
            let cells: Vec<String> =
                (0..self.header.len()).map(|c| md_escape(cells.get(c).map_or("", String::as_str))).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        out.push_str(&line(&self.header));
        let rule: Vec<&str> = (0..self.header.len()).map(|c| if self.is_right(c) { "---:" } else { "---" }).collect();
        let _ = writeln!(out, "| {} |", rule.join(" | "));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    /// CSV with `\n` line ends; the title is not printed.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = row.iter().map(|c| csv_field(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// An HTML `<table>` (with a `<caption>` for the title); numeric columns get class `num`.
    pub fn html(&self) -> String {
        let mut out = String::from("<table>\n");
        if let Some(t) = &self.title {
            let _ = writeln!(out, "<caption>{}</caption>", html_escape(t));
        }
        let class = |c: usize| if self.is_right(c) { " class=\"num\"" } else { "" };
        out.push_str("<thead><tr>");
        for (c, h) in self.header.iter().enumerate() {
            let _ = write!(out, "<th{}>{}</th>", class(c), html_escape(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for c in 0..self.header.len() {
                let cell = row.get(c).map_or("", String::as_str);
                let _ = write!(out, "<td{}>{}</td>", class(c), html_escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// Escapes text for HTML content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Characters HTML does not allow (NUL and the other controls) as their escapes.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(vec!["NAME".into(), "VALUE".into()]).with_title("Title");
        t.right = vec![false, true];
        t.rows.push(vec!["a|b".into(), "1.50".into()]);
        t.rows.push(vec!["x, \"y\"".into(), "12.00".into()]);
        t
    }

    #[test]
    fn every_format_aligns_or_escapes() {
        let t = sample();
        assert_eq!(t.text(), "Title\nNAME    VALUE\na|b      1.50\nx, \"y\"  12.00\n");
        assert_eq!(
            t.markdown(),
            "**Title**\n\n| NAME | VALUE |\n| --- | ---: |\n| a\\|b | 1.50 |\n| x, \"y\" | 12.00 |\n"
        );
        assert_eq!(t.csv(), "NAME,VALUE\na|b,1.50\n\"x, \"\"y\"\"\",12.00\n");
        let html = t.html();
        assert!(html.contains("<caption>Title</caption>"), "{html}");
        assert!(html.contains("<td>x, &quot;y&quot;</td><td class=\"num\">12.00</td>"), "{html}");
        assert_eq!(html_escape("<a href='x'>&</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
    }
}
