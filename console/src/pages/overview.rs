//! `GET /overview`: the counts per provider, the lag, the last hour's chart and the
//! outbox per sink.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The minutes the overview's chart covers.
pub(super) const CHART_MINUTES: i64 = 60;

/// `GET /` and `GET /overview`.
pub(crate) async fn overview(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let since = ctx.now - Duration::minutes(CHART_MINUTES);
    let inbox = match InboxAdmin::overview(app.store(), since).await {
        Ok(inbox) => inbox,
        Err(err) => return store_failed(&ctx, &err),
    };
    let sinks = match OutboxAdmin::sinks(app.store()).await {
        Ok(sinks) => sinks,
        Err(err) => return store_failed(&ctx, &err),
    };
    let base = &ctx.base;
    let link = |q: &str| escape(&format!("{base}/deliveries?{q}"));
    let mut out = String::from("<h1>Overview</h1>");
    out.push_str("<section class=\"panel\"><h2>Inbox by provider</h2>");
    if inbox.providers.is_empty() {
        out.push_str("<p class=\"muted\">The inbox is empty.</p>");
    } else {
        out.push_str(
            "<table id=\"providers\"><thead><tr><th>Provider</th><th class=\"num\">Received</th>\
             <th class=\"num\">Processed</th><th class=\"num\">Pending</th><th class=\"num\">Failed</th>\
             <th class=\"num\">Dead</th><th>Lag (oldest pending)</th></tr></thead><tbody>",
        );
        let mut totals = [0u64; 5];
        for p in &inbox.providers {
            let q = |state: &str| query([("state", state), ("provider", p.provider.as_str())]);
            let _ = write!(
                out,
                "<tr><td><a href=\"{}\">{}</a></td><td class=\"num\">{}</td>\
                 <td class=\"num\"><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\">{}</a></td>\
                 <td class=\"num\"><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\" data-count=\"dead\">{}</a></td><td>{}</td></tr>",
                link(&q("")),
                Esc(&p.provider),
                p.received(),
                link(&q("processed")),
                p.processed,
                link(&q("pending")),
                p.pending,
                link(&q("failed")),
                p.failed,
                link(&q("dead")),
                p.dead,
                p.oldest_pending.map_or_else(
                    || "<span class=\"muted\">none pending</span>".to_string(),
                    |at| format!(
                        "{} <span class=\"hint\">since {}</span>",
                        age(at, ctx.now),
                        time(at)
                    )
                ),
            );
            for (total, n) in
                totals
                    .iter_mut()
                    .zip([p.received(), p.processed, p.pending, p.failed, p.dead])
            {
                *total += n;
            }
        }
        let _ = write!(
            out,
            "<tr class=\"total\"><th>All</th><th class=\"num\">{}</th><th class=\"num\">{}</th>\
             <th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\" id=\"total-dead\">{}</th><th></th></tr>",
            totals[0], totals[1], totals[2], totals[3], totals[4]
        );
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");

    out.push_str("<section class=\"panel\"><h2>Received and processed per minute, last hour</h2>");
    out.push_str(&chart(&inbox.minutes));
    out.push_str("</section>");

    out.push_str("<section class=\"panel\"><h2>Outbox by sink</h2>");
    if sinks.is_empty() {
        out.push_str("<p class=\"muted\">No outbox messages.</p>");
    } else {
        out.push_str(
            "<table id=\"sinks\"><thead><tr><th>Sink</th><th class=\"num\">Backlog</th><th class=\"num\">Sent</th>\
             <th class=\"num\">Dead</th><th>Lag (oldest pending)</th></tr></thead><tbody>",
        );
        for s in &sinks {
            let q = |state: &str| {
                escape(&format!(
                    "{base}/outbox?{}",
                    query([("state", state), ("sink", s.sink.as_str())])
                ))
            };
            let _ = write!(
                out,
                "<tr><td><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\">{}</a></td>\
                 <td class=\"num\">{}</td><td class=\"num\"><a href=\"{}\">{}</a></td><td>{}</td></tr>",
                q(""),
                Esc(&s.sink),
                q("pending"),
                s.pending,
                s.sent,
                q("dead"),
                s.dead,
                s.oldest_pending.map_or_else(
                    || "<span class=\"muted\">none pending</span>".to_string(),
                    |at| age(at, ctx.now)
                ),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    render(&ctx, "Overview", "overview", &out)
}

/// An SVG bar chart of received (light) and processed (dark) per minute.
pub(super) fn chart(minutes: &[hookbox_core::MinuteCounts]) -> String {
    if minutes.is_empty() {
        return "<p class=\"muted\">No minutes to show.</p>".to_string();
    }
    let (width, height, top) = (600.0_f64, 130.0_f64, 12.0_f64);
    let max = minutes
        .iter()
        .map(|m| m.received.max(m.processed))
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = width / minutes.len() as f64;
    let bar = (slot / 2.0 - 0.5).max(0.5);
    let mut out = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {width} {height}\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"received and processed per minute\">"
    );
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"0\" y1=\"{height}\" x2=\"{width}\" y2=\"{height}\"/>"
    );
    for (i, m) in minutes.iter().enumerate() {
        let x = i as f64 * slot;
        for (offset, value, class) in [
            (0.0, m.received, "received"),
            (bar, m.processed, "processed"),
        ] {
            if value == 0 {
                continue;
            }
            let h = (height - top) * value as f64 / max as f64;
            let minute = m
                .minute
                .format(&hookbox_core::time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{:.2}\" y=\"{:.2}\" width=\"{bar:.2}\" height=\"{h:.2}\"><title>{} {value} {class}</title></rect>",
                x + offset,
                height - h,
                Esc(&minute)
            );
        }
    }
    let _ = write!(
        out,
        "</svg><div class=\"legend\"><span>-{CHART_MINUTES} min</span><span><span class=\"swatch received\"></span>received</span>\
         <span><span class=\"swatch processed\"></span>processed</span><span>highest: {max}/min</span><span class=\"end\">now</span></div>"
    );
    out
}
