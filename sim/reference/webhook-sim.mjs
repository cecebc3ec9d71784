// webhook-sim.mjs: a seeded simulation of webhook receivers under at-least-once delivery.
// Node 24+, no dependencies. Run: node webhook-sim.mjs
// Everything here is synthetic: event names, accounts and fault rates are chosen, not measured.
import { DatabaseSync } from "node:sqlite";
import os from "node:os";
import fs from "node:fs";
import path from "node:path";

const SEED = 20261023;
const N_EVENTS = 10000;
const N_ACCOUNTS = 500;
const P_CREDIT = 0.6;       // chance an event is "add 100 credits" (else "set plan")
const P_TIE = 0.05;         // chance a plan update gets a second update for the same account in the same second
const P_DUPLICATE = 0.03;   // fault 1: chance a delivery is sent again later
const P_ACK_LOST = 0.02;    // fault 2: chance a delivery's 200 response is lost after the handler committed
const P_CONCURRENT = 0.01;  // fault 3: chance the first delivery arrives twice at the same moment
const P_SHUFFLE = 0.10;     // fault 4: chance a delivery is moved up to 20 positions
const SHUFFLE_WINDOW = 20;

// ---------- deterministic randomness ----------
function mulberry32(a) {
  return function () {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// A draw keyed by (event, attempt, purpose), so every handler sees the same faults
// no matter in which order it processes deliveries.
function keyed(...parts) {
  let h = SEED >>> 0;
  for (const ch of parts.join("|")) h = Math.imul(h ^ ch.charCodeAt(0), 2654435761) >>> 0;
  return mulberry32(h)();
}

// ---------- logical events ----------
function makeEvents() {
  const rnd = mulberry32(SEED);
  const events = [];
  const planVersion = new Array(N_ACCOUNTS).fill(0);
  let t = 1790000000; // synthetic epoch seconds
  const push = (e) => { e.id = "evt_" + String(events.length).padStart(6, "0"); e.idx = events.length; events.push(e); };
  while (events.length < N_EVENTS) {
    if (rnd() < 0.5) t += 1;
    const acct = Math.floor(rnd() * N_ACCOUNTS);
    if (rnd() < P_CREDIT) {
      push({ type: "credit", acct, amount: 100, created: t });
    } else {
      push({ type: "plan", acct, version: ++planVersion[acct], created: t });
      if (rnd() < P_TIE && events.length < N_EVENTS) {
        push({ type: "plan", acct, version: ++planVersion[acct], created: t, tie: true });
      }
    }
  }
  return { events, planVersion };
}

// ---------- delivery stream ----------
function makeGroups(events) {
  const groups = [];
  for (const e of events) {
    let at = e.idx;
    if (keyed(e.id, "shuffle") < P_SHUFFLE) at += (keyed(e.id, "shift") * 2 - 1) * SHUFFLE_WINDOW;
    const copies = keyed(e.id, "concurrent") < P_CONCURRENT ? 2 : 1;
    groups.push({ at, event: e, copies, kind: copies === 2 ? "first+concurrent" : "first" });
    if (keyed(e.id, "dup") < P_DUPLICATE) {
      groups.push({ at: e.idx + 1 + keyed(e.id, "dupAt") * 200, event: e, copies: 1, kind: "duplicate" });
    }
  }
  return groups.sort((a, b) => a.at - b.at || a.event.idx - b.event.idx);
}

// ---------- receivers ----------
const io = () => new Promise((r) => setImmediate(r)); // simulated I/O (parse, verify, network)

function freshDb(file = ":memory:") {
  const db = new DatabaseSync(file);
  db.exec(`
    CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, credits INTEGER NOT NULL DEFAULT 0,
      plan TEXT, plan_version INTEGER NOT NULL DEFAULT 0, plan_created INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY);
    CREATE TABLE IF NOT EXISTS applied (event_id TEXT NOT NULL);`);
  if (db.prepare("SELECT count(*) n FROM accounts").get().n === 0) {
    const ins = db.prepare("INSERT INTO accounts (id) VALUES (?)");
    db.exec("BEGIN"); for (let i = 0; i < N_ACCOUNTS; i++) ins.run(i); db.exec("COMMIT");
  }
  return db;
}

function prep(db) {
  return {
    credit: db.prepare("UPDATE accounts SET credits = credits + ? WHERE id = ?"),
    setPlan: db.prepare("UPDATE accounts SET plan = ?, plan_version = ?, plan_created = ? WHERE id = ?"),
    getAcct: db.prepare("SELECT plan_version, plan_created FROM accounts WHERE id = ?"),
    applied: db.prepare("INSERT INTO applied (event_id) VALUES (?)"),
    seen: db.prepare("SELECT 1 FROM processed_events WHERE event_id = ?"),
    mark: db.prepare("INSERT INTO processed_events (event_id) VALUES (?)"),
    claim: db.prepare("INSERT INTO processed_events (event_id) VALUES (?) ON CONFLICT DO NOTHING"),
    staleWrites: 0,
  };
}

function apply(s, e, guard) {
  if (e.type === "credit") { s.credit.run(e.amount, e.acct); s.applied.run(e.id); return; }
  const cur = s.getAcct.get(e.acct);
  if (guard === "version" || guard === "created>=" || guard === "created>") {
    const ok = guard === "version" ? e.version > cur.plan_version
      : guard === "created>=" ? e.created >= cur.plan_created
      : e.created > cur.plan_created;
    if (!ok) return; // stale: recorded as processed, not applied
  }
  if (e.version < cur.plan_version) s.staleWrites++; // an older plan overwrote a newer one
  s.setPlan.run("plan_v" + e.version, e.version, e.created, e.acct);
  s.applied.run(e.id);
}

const handlers = {
  "a naive": async (db, s, e) => { await io(); apply(s, e); return 200; },
  "b check-then-insert": async (db, s, e) => {
    if (s.seen.get(e.id)) return 200;
    await io();
    apply(s, e);
    try { s.mark.run(e.id); } catch { return 500; }
    return 200;
  },
  "c atomic insert": async (db, s, e) => atomic(db, s, e, null),
  "d order by created>=": async (db, s, e) => atomic(db, s, e, "created>="),
  "d order by created>": async (db, s, e) => atomic(db, s, e, "created>"),
  "d version guard": async (db, s, e) => atomic(db, s, e, "version"),
};

async function atomic(db, s, e, guard) {
  await io(); // the await happens before the transaction, never inside it
  db.exec("BEGIN IMMEDIATE");
  try {
    if (s.claim.run(e.id).changes === 0) { db.exec("COMMIT"); return 200; } // duplicate: skip and ack
    apply(s, e, guard);
    db.exec("COMMIT");
    return 200;
  } catch (err) { db.exec("ROLLBACK"); throw err; }
}

async function runHandler(name, events, groups, latestPlan, trace, tieTrace) {
  const db = freshDb();
  const s = prep(db);
  const h = handlers[name];
  const queue = groups.map((g) => ({ ...g }));
  const attempts = new Map();
  let deliveries = 0, errors = 0;
  const log = [];
  let tieAfter = null;
  const enqueue = (item) => {
    let i = queue.findIndex((q) => q.at > item.at);
    if (i === -1) i = queue.length;
    queue.splice(i, 0, item);
  };
  while (queue.length) {
    const g = queue.shift();
    const e = g.event;
    const runs = [];
    for (let c = 0; c < g.copies; c++) {
      const n = (attempts.get(e.id) || 0) + 1;
      attempts.set(e.id, n);
      runs.push(h(db, s, e).then((status) => ({ status, n })));
    }
    for (const { status, n } of await Promise.all(runs)) {
      deliveries++;
      if (e.id === trace) log.push(`${g.kind} attempt ${n}: ${status}`);
      if (e.id === tieTrace && n === 1) tieAfter = s.getAcct.get(e.acct).plan_version;
      if (status >= 500) {
        errors++;
        enqueue({ at: g.at + 5 + keyed(e.id, n, "retryAt") * 200, event: e, copies: 1, kind: "retry-after-500" });
      } else if (keyed(e.id, n, "ackLost") < P_ACK_LOST) {
        enqueue({ at: g.at + 5 + keyed(e.id, n, "retryAt") * 200, event: e, copies: 1, kind: "retry-after-timeout" });
        if (e.id === trace) log[log.length - 1] += " (response lost, sender retries)";
      }
    }
  }
  const credits = events.filter((e) => e.type === "credit");
  const appliedCounts = new Map(db.prepare("SELECT event_id, count(*) c FROM applied GROUP BY event_id").all().map((r) => [r.event_id, r.c]));
  let dupEvents = 0, dupApplies = 0, lost = 0;
  for (const e of credits) {
    const c = appliedCounts.get(e.id) || 0;
    if (c === 0) lost++;
    if (c > 1) { dupEvents++; dupApplies += c - 1; }
  }
  let stale = 0;
  for (const r of db.prepare("SELECT id, plan_version FROM accounts").all()) {
    if (latestPlan[r.id] > 0 && r.plan_version !== latestPlan[r.id]) stale++;
  }
  const ledger = db.prepare("SELECT sum(credits) s FROM accounts").get().s;
  const expected = credits.length * 100;
  const tracedApplied = appliedCounts.get(trace) || 0;
  db.close();
  return { name, deliveries, errors, dupEvents, dupApplies, lost, stale, staleWrites: s.staleWrites, ledger, expected, log, tracedApplied, tieAfter };
}

// ---------- retention test: dedupe keys with a TTL vs a provider retry schedule ----------
function retention() {
  const H = 3600, D = 86400;
  const cum = (delays) => { let t = 0; return delays.map((d) => (t += d)); };
  const schedules = {
    "Svix published schedule": cum([0, 5, 300, 1800, 2 * H, 5 * H, 10 * H, 10 * H]),
    "Standard Webhooks example": cum([0, 5, 300, 1800, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H]),
    "3-day window, illustrative intervals": [0, 60, 360, 2160, 5760, 12960, 27360, 56160, 113760, 172800, 259200],
  };
  const ttls = [["5 min", 300], ["24 h", D], ["7 days", 7 * D], ["30 days", 30 * D]];
  const P_LOST = 0.05, P_UNREACHABLE = 0.5, P_MANUAL = 0.005;
  const rows = [];
  for (const [sname, offsets] of Object.entries(schedules)) {
    const manual = sname.startsWith("3-day");
    for (const [tname, ttl] of ttls) {
      let applies = 0;
      for (let i = 0; i < N_EVENTS; i++) {
        let expires = -1, done = false;
        const visit = (t, n) => {
          if (t >= expires) { applies++; expires = t + ttl; }
          return keyed("ret", sname, i, n, "lost") >= P_LOST; // true when the 200 reaches the sender
        };
        for (let n = 0; n < offsets.length && !done; n++) {
          if (n > 0 && keyed("ret", sname, i, n, "down") < P_UNREACHABLE) continue; // never reached us
          done = visit(offsets[n], n);
        }
        if (manual && keyed("ret", sname, i, "manual") < P_MANUAL) {
          visit(D + keyed("ret", sname, i, "manualAt") * 14 * D, "manual");
        }
      }
      rows.push([sname, tname, applies - N_EVENTS]);
    }
    rows.push([sname, "last retry at", fmt(offsets[offsets.length - 1])]);
  }
  return rows;
}
function fmt(sec) {
  const h = Math.floor(sec / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  return `${h}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}`;
}

// ---------- crash test: process dies after the dedupe insert, before the side effect ----------
function crashTest(design) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "whsim-"));
  const file = path.join(dir, "crash.db");
  let db = freshDb(file), s = prep(db);
  const N = 2000, P_CRASH = 0.01;
  let crashes = 0;
  const queue = [];
  for (let i = 0; i < N; i++) queue.push({ id: "evt_c" + String(i).padStart(5, "0"), acct: i % N_ACCOUNTS, n: 1 });
  while (queue.length) {
    const d = queue.shift();
    const crash = keyed("crash", d.id, d.n) < P_CRASH;
    if (design === "split") {
      if (s.seen.get(d.id)) continue;            // already "processed": ack
      s.mark.run(d.id);                           // dedupe row commits on its own
      if (crash) { crashes++; db.close(); db = freshDb(file); s = prep(db); queue.push({ ...d, n: d.n + 1 }); continue; }
      s.credit.run(100, d.acct); s.applied.run(d.id);
    } else {
      db.exec("BEGIN IMMEDIATE");
      if (s.claim.run(d.id).changes === 0) { db.exec("COMMIT"); continue; }
      if (crash) { crashes++; db.close(); db = freshDb(file); s = prep(db); queue.push({ ...d, n: d.n + 1 }); continue; } // no COMMIT: SQLite discards the open transaction
      s.credit.run(100, d.acct); s.applied.run(d.id);
      db.exec("COMMIT");
    }
  }
  const applied = db.prepare("SELECT count(DISTINCT event_id) c FROM applied").get().c;
  const keys = db.prepare("SELECT count(*) c FROM processed_events").get().c;
  const ledger = db.prepare("SELECT sum(credits) s FROM accounts").get().s;
  db.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { design, N, crashes, keys, applied, lost: N - applied, ledger, expected: N * 100 };
}

// ---------- sender side: 1,000 failed deliveries retrying, with and without jitter ----------
function jitter() {
  const N = 1000, RECOVER = 300, BASE = 1, CAP = 3600;
  const out = [];
  for (const mode of ["exponential, no jitter", "exponential, full jitter"]) {
    const rnd = mulberry32(SEED + (mode.includes("full") ? 1 : 0));
    const buckets = new Map();
    let attempts = 0, lastOk = 0;
    for (let i = 0; i < N; i++) {
      let t = 0, k = 0;
      while (true) {
        attempts++;
        const sec = Math.floor(t);
        buckets.set(sec, (buckets.get(sec) || 0) + 1);
        if (t >= RECOVER) { lastOk = Math.max(lastOk, t); break; }
        const d = Math.min(CAP, BASE * 2 ** k++);
        t += mode.includes("full") ? rnd() * d : d;
      }
    }
    let peakAfter = 0;
    for (const [sec, n] of buckets) if (sec >= RECOVER) peakAfter = Math.max(peakAfter, n);
    out.push({ mode, attempts, peakAfter, lastOk: Math.round(lastOk) });
  }
  return out;
}

// ---------- main ----------
const pad = (v, n) => String(v).padEnd(n);
const lpad = (v, n) => String(v).padStart(n);
const probe = new DatabaseSync(":memory:");
console.log("webhook-sim (simulation, synthetic data)");
console.log("seed:", SEED);
console.log("node:", process.version);
console.log("sqlite:", probe.prepare("SELECT sqlite_version() v").get().v);
console.log("machine:", os.cpus()[0].model, os.platform(), os.arch());
console.log("run date:", new Date().toISOString().slice(0, 10));
probe.close();

const { events, planVersion } = makeEvents();
const groups = makeGroups(events);
const ties = events.filter((e) => e.tie).length;
console.log(`events: ${events.length} (${events.filter((e) => e.type === "credit").length} credit, ${events.filter((e) => e.type === "plan").length} plan), accounts: ${N_ACCOUNTS}, same-second plan pairs: ${ties}`);
console.log(`chances per delivery: duplicate ${P_DUPLICATE}, response lost after commit ${P_ACK_LOST}, concurrent redelivery ${P_CONCURRENT}, shuffled ${P_SHUFFLE} (window ${SHUFFLE_WINDOW})`);

// Traced event: first credit event with a concurrent pair, else the credit event with the most scheduled deliveries.
const perEvent = new Map();
for (const g of groups) perEvent.set(g.event.id, (perEvent.get(g.event.id) || 0) + g.copies);
const concurrentCredit = groups.find((g) => g.copies === 2 && g.event.type === "credit");
const trace = concurrentCredit ? concurrentCredit.event : events.filter((e) => e.type === "credit").sort((a, b) => perEvent.get(b.id) - perEvent.get(a.id))[0];
const latestPlan = planVersion;

// Traced tie: the first same-second pair whose newer update arrived first.
const pos = new Map();
groups.forEach((g, i) => { if (!pos.has(g.event.id)) pos.set(g.event.id, i); });
const reversed = events.filter((e) => e.tie && pos.get(e.id) < pos.get(events[e.idx - 1].id));
const tieTrace = reversed.length ? events[reversed[0].idx - 1].id : null;

const results = [];
for (const name of Object.keys(handlers)) results.push(await runHandler(name, events, groups, latestPlan, trace.id, tieTrace));

console.log("\n== handlers (simulation)");
console.log(pad("handler", 22) + lpad("deliveries", 11) + lpad("5xx", 6) + lpad("dup events", 11) + lpad("extra applies", 14) + lpad("lost", 6) + lpad("stale writes", 13) + lpad("stale accts", 12) + lpad("ledger", 10) + lpad("expected", 10));
for (const r of results) {
  console.log(pad(r.name, 22) + lpad(r.deliveries, 11) + lpad(r.errors, 6) + lpad(r.dupEvents, 11) + lpad(r.dupApplies, 14) + lpad(r.lost, 6) + lpad(r.staleWrites, 13) + lpad(r.stale, 12) + lpad(r.ledger, 10) + lpad(r.expected, 10));
}

console.log(`\n== traced event ${trace.id}: add ${trace.amount} credits to acct_${String(trace.acct).padStart(4, "0")}`);
for (const r of results.slice(0, 3)) {
  console.log(`${r.name}: applied ${r.tracedApplied}x`);
  for (const l of r.log) console.log("  " + l);
}

console.log(`\n== same-second pairs delivered newer-first: ${reversed.length} of ${ties}`);
if (reversed.length) {
  const e = reversed[0], older = events[e.idx - 1];
  console.log(`example acct_${String(e.acct).padStart(4, "0")}: ${older.id} sets plan_v${older.version}, ${e.id} sets plan_v${e.version}, both created ${e.created}; arrival order ${e.id} then ${older.id}`);
  for (const r of results) console.log(`  ${r.name}: plan_v${r.tieAfter} after both arrived`);
}

console.log("\n== retention: duplicate applies that got past the dedupe store (simulation)");
console.log("chances: response lost after processing 0.05 per attempt, later attempt unreachable 0.5, manual resend 0.005 (3-day row only, 1 to 15 days later)");
for (const [s, t, n] of retention()) console.log(pad(s, 38) + pad(t, 15) + lpad(n, 8));

console.log("\n== crash after dedupe insert, before side effect (simulation, file-backed SQLite, chance 0.01 per delivery)");
console.log(pad("design", 34) + lpad("events", 7) + lpad("crashes", 8) + lpad("keys", 6) + lpad("applied", 8) + lpad("lost", 6) + lpad("ledger", 8) + lpad("expected", 9));
for (const design of ["split", "atomic"]) {
  const r = crashTest(design);
  const label = design === "split" ? "insert key, then side effect" : "insert key + side effect, one tx";
  console.log(pad(label, 34) + lpad(r.N, 7) + lpad(r.crashes, 8) + lpad(r.keys, 6) + lpad(r.applied, 8) + lpad(r.lost, 6) + lpad(r.ledger, 8) + lpad(r.expected, 9));
}

console.log("\n== sender retries: 1,000 failed deliveries, receiver back at t=300 s (simulation)");
for (const r of jitter()) console.log(pad(r.mode, 26) + ` attempts ${r.attempts}, peak per second after recovery ${r.peakAfter}, last delivered at t=${r.lastOk} s`);
