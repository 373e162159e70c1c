//! HTML for the console: escaping, the page frame, and small table helpers. Every value that
//! came from a tenant, a key name, a model name or a log goes through `escape`.

use std::fmt::Write as _;

/// Text safe inside an element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = include_str!("console.css");

/// The pages in the navigation bar: path and label.
const NAV: [(&str, &str); 5] = [
    ("/ui/engine", "Engine"),
    ("/ui/tenants", "Tenants and keys"),
    ("/ui/usage", "Usage and cost"),
    ("/ui/guard", "Guardrails"),
    ("/ui/reports", "Reports"),
];

/// A whole page for a signed-in admin: navigation, `body`, and the sign-out form.
pub fn page(title: &str, active: &str, signed_in_as: &str, csrf: &str, body: &str) -> String {
    let mut nav = String::new();
    for (path, label) in NAV {
        let class = if path == active {
            " class=\"active\""
        } else {
            ""
        };
        let _ = write!(nav, "<a href=\"{path}\"{class}>{label}</a>");
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>{title} - Pagoda</title><style>{STYLE}</style></head><body>\
         <header><span class=\"brand\">Pagoda</span><nav>{nav}</nav>\
         <form method=\"post\" action=\"/ui/logout\" class=\"signout\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <span>{who}</span><button type=\"submit\">Sign out</button></form></header>\
         <main><h1>{title}</h1>{body}</main>\
         <script src=\"/ui/console.js\"></script></body></html>",
        title = escape(title),
        who = escape(signed_in_as),
    )
}

/// The sign-in page, alone: nothing of the deployment is on it.
pub fn sign_in(message: Option<&str>) -> String {
    let note = message.map_or(String::new(), |m| {
        format!("<p class=\"error\" id=\"sign-in-error\">{}</p>", escape(m))
    });
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>Sign in - Pagoda</title><style>{STYLE}</style></head><body class=\"signin\">\
         <main><h1>Pagoda console</h1>{note}\
         <form method=\"post\" action=\"/ui/login\" id=\"sign-in\">\
         <label>Admin API key <input type=\"password\" name=\"key\" autocomplete=\"off\" required></label>\
         <button type=\"submit\">Sign in</button></form></main></body></html>"
    )
}

/// A table with a header row; cells are HTML already (escape what needs it).
pub fn table(id: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<div class=\"scroll\"><table id=\"{id}\"><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\" class=\"empty\">nothing yet</td></tr>",
            headers.len()
        );
    }
    out.push_str("</tbody></table></div>");
    out
}

/// A UTC time, or "-".
pub fn time(ms: Option<i64>) -> String {
    ms.map_or("-".to_string(), pagoda_gateway::clock::format_ms)
}

/// A figure with `decimals` places, or "-" when it is not finite (a hand-edited report).
pub fn num(value: f64, decimals: usize) -> String {
    if value.is_finite() {
        format!("{value:.decimals$}")
    } else {
        "-".to_string()
    }
}
