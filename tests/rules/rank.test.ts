import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parseFrontmatter } from "../../plugin/files/frontmatter.ts";
import { type AgentDoc, AgentRanker, DEFAULT_THRESHOLD, DEFAULT_TOP, headingsOf, type Ranked } from "../../plugin/rules/rank.ts";

// ---------------------------------------------------------------------------------------------------
// The calibration fixture: DEFAULT_THRESHOLD and DEFAULT_TOP are chosen on it (see rank.ts).

/** A monorepo's agent files, written as such files are (frontmatter description, headings, body). */
const FILES: readonly { readonly key: string; readonly text: string }[] = [
  {
    key: "packages/db/AGENTS.md",
    text: `---
include: agent
description: Database schema changes - writing, running and rolling back Prisma migrations in packages/db
---
# Database migrations

## Writing a migration
Change \`schema.prisma\`, then run \`pnpm db:migrate:dev --name <what-changed>\`. Name migrations after
what they do (\`add_invoice_due_date\`), never after a ticket number. One migration per pull request.

## Applied migrations are immutable
Never edit a migration that has been applied anywhere (staging included): write a new one. Prisma
detects drift from the checksum and \`migrate deploy\` refuses to run.

## Rolling back
There is no automatic down migration. Write the inverse SQL by hand in a new migration, test it on a
copy of production data (\`pnpm db:snapshot\`), and keep destructive steps (DROP COLUMN) for a
second release once no code reads the column.

## Seeds
\`packages/db/seed.ts\` must stay idempotent: upsert, never insert.
`,
  },
  {
    key: "packages/ui/AGENTS.md",
    text: `---
include: agent
description: Building React components in packages/ui - props, hooks, styling with Tailwind and Storybook stories
---
# UI components

## Structure
One component per folder: \`Button/Button.tsx\`, \`Button/Button.stories.tsx\`, \`Button/index.ts\`.
Components are function components with typed props; no default exports.

## Styling
Tailwind classes only, composed with \`cn()\`. No inline styles, no CSS modules. Variants go through
\`cva\`. Respect the design tokens in \`tailwind.config.ts\`.

## State and hooks
Keep components controlled when a parent needs the value. Custom hooks live in \`src/hooks\` and
start with \`use\`. Memoize only what a profiler shows is slow.

## Stories
Every component has a Storybook story for each variant, including loading, disabled and error states.
`,
  },
  {
    key: "services/payments/AGENTS.md",
    text: `---
include: agent
description: Payments API (services/payments) - Stripe charges, refunds, webhooks and idempotency keys
---
# Payments service

## Charges
Amounts are integers in the smallest currency unit. Always pass an \`Idempotency-Key\` header built
from the order id, so that a retried request never charges twice.

## Refunds and disputes
Refunds go through \`refundCharge()\`; partial refunds must not exceed the captured amount.
Disputes arrive as webhook events (\`charge.dispute.created\`) and freeze the order.

## Webhooks
Verify the Stripe signature before parsing the body. Handlers must be idempotent: Stripe retries
for three days. Store the event id and skip events already processed.

## Testing
Use Stripe test clocks and the \`stripe-mock\` container; never hit the live API from tests.
`,
  },
  {
    key: "tools/release/AGENTS.md",
    text: `---
include: agent
description: Release process - versioning with changesets, changelog, git tags and publishing packages to npm
---
# Releasing

## Changesets
Every user-visible change needs a changeset (\`pnpm changeset\`): patch for fixes, minor for
features, major for breaking changes. The changelog is generated from them; do not edit CHANGELOG.md.

## Cutting a release
Run the "Version packages" workflow, review the version bumps, merge it. Tags (\`v2.4.0\`) are created
by CI; never tag by hand.

## Publishing
\`pnpm release\` publishes to npm with provenance. A failed publish is retried by re-running the job,
not by bumping the version again.
`,
  },
  {
    key: "packages/i18n/AGENTS.md",
    text: `---
include: agent
description: Internationalization - translation strings, locales, plurals and date formats with i18next
---
# i18n

## Adding strings
Every user-facing string goes through \`t("namespace.key")\`. Add the English source to
\`locales/en/<namespace>.json\`; translators fill the other locales. Never concatenate translated
fragments: word order differs between languages.

## Locales
Supported locales: en, de, fr, ja, pt-BR. A new locale needs its folder, an entry in \`locales.ts\`
and a fallback chain.

## Plurals and formats
Use i18next plural keys (\`_one\`, \`_other\`), and \`Intl.DateTimeFormat\` / \`Intl.NumberFormat\` for
dates, currencies and numbers. Right-to-left languages are not supported yet.
`,
  },
  {
    key: "docs/security/AGENTS.md",
    text: `---
include: agent
description: Security review checklist - authentication, secrets, input validation, XSS, SQL injection, dependency audit
---
# Security review

## Input validation
Validate every external input with zod at the boundary. Build SQL with parameterized queries only;
string concatenation into a query is an injection.

## Output encoding
React escapes by default; \`dangerouslySetInnerHTML\` needs a sanitizer (DOMPurify) and a reviewer.

## Secrets
Secrets never go in the repository, in logs or in error messages. Rotate any secret that leaked.

## Authentication and authorization
Check permissions on the server for every request, not only in the UI.

## Dependencies
\`pnpm audit\` must be clean of high and critical advisories before a release.
`,
  },
  {
    key: "docs/AGENTS.md",
    text: `---
include: agent
description: Writing documentation under docs/ - tone, structure, code samples and links
---
# Documentation style

## Tone
Second person, present tense, short sentences. Explain why before how. No marketing words.

## Structure
Each page starts with what the reader will achieve. Guides are task-oriented; reference pages are
complete and dry. The README only links to the docs site.

## Code samples
Samples must run as written: the docs build executes them. Show the output when it matters.

## Links
Link to other pages by relative path; the link checker fails the docs build on a dead link.
`,
  },
  {
    key: ".github/AGENTS.md",
    text: `---
include: agent
description: Continuous integration - GitHub Actions workflows, caching, flaky tests and required checks
---
# CI

## Workflows
Workflows live in \`.github/workflows\`. Pin third-party actions by commit SHA. Jobs run on
ubuntu-latest with the Node version from \`.nvmrc\`.

## Caching
Cache the pnpm store keyed by the lockfile hash; never cache node_modules.

## Flaky tests
A test that fails then passes on retry is flaky: quarantine it with \`test.fixme\` and open an issue
labelled \`flaky\`. Do not raise the retry count.

## Required checks
lint, typecheck, unit and e2e must pass before merge. The build time budget is ten minutes.
`,
  },
  {
    key: "apps/web/src/auth/AGENTS.md",
    text: `---
include: agent
description: Sessions in the web app - the useAuthToken hook, token refresh, login and logout
---
# Auth in the web app

## useAuthToken
\`useAuthToken()\` returns the current access token and refreshes it one minute before it expires.
Never read the token from localStorage directly.

## Login and logout
Logout clears the query cache and broadcasts to other tabs through BroadcastChannel, so that every tab
signs out together.

## Refresh tokens
Refresh tokens live in an httpOnly cookie; the client never sees them.
`,
  },
  {
    key: "packages/testing/AGENTS.md",
    text: `---
include: agent
description: Writing and running tests - unit tests with Vitest, end-to-end tests with Playwright, fixtures and mocks
---
# Tests

## Unit tests
Vitest, colocated as \`*.test.ts\`. Test behaviour through the public API; mock the network with msw,
nothing else.

## End-to-end tests
Playwright specs in \`e2e/\`, against a seeded database. Select elements by role and label, never by
CSS class.

## Fixtures
Factories in \`packages/testing/factories\` build valid objects; override only what the test is about.
`,
  },
  {
    key: "services/observability/AGENTS.md",
    text: `---
include: agent
description: Logging, metrics and tracing - structured logs, OpenTelemetry spans, Grafana dashboards and alerts
---
# Observability

## Logs
Structured JSON logs through \`logger\`, never console.log. Include the request id. No personal data.

## Traces
Wrap outgoing calls and slow handlers in an OpenTelemetry span; name spans \`<service>.<operation>\`.

## Metrics and alerts
Counters and histograms through the shared meter. Every alert links to a runbook and a Grafana
dashboard.
`,
  },
  {
    key: "infra/AGENTS.md",
    text: `---
include: agent
---
# Infrastructure

## Terraform modules
Modules live in \`infra/modules\`, one per AWS service we use (S3 buckets, RDS, ECS services). Run
\`terraform fmt\` and \`terraform plan\` before opening a pull request; paste the plan in the PR.

## Deploying to staging and production
Deploys go through the \`deploy\` workflow: staging on every merge, production by manual approval.
Never run \`terraform apply\` from a laptop.

## Secrets in AWS SSM
Application secrets are SSM parameters under \`/app/<env>/\`; ECS tasks read them at start-up.
`,
  },
];

/** Messages about one file's subject, with the file that must come first (and any that may follow). */
const RELATED: readonly { readonly message: string; readonly first: string }[] = [
  { message: "add a migration that creates the invoices table", first: "packages/db/AGENTS.md" },
  { message: "prisma migrate deploy fails on staging with a drift error", first: "packages/db/AGENTS.md" },
  { message: "how do I roll back the last migration?", first: "packages/db/AGENTS.md" },
  { message: "Create a Button component with a loading state", first: "packages/ui/AGENTS.md" },
  { message: "write storybook stories for the Modal component", first: "packages/ui/AGENTS.md" },
  { message: "refund the charge when stripe sends a dispute webhook", first: "services/payments/AGENTS.md" },
  { message: "make the payments API endpoint idempotent", first: "services/payments/AGENTS.md" },
  { message: "How do I cut a new release and publish the packages to npm?", first: "tools/release/AGENTS.md" },
  { message: "add a changeset for this fix", first: "tools/release/AGENTS.md" },
  { message: "translate the checkout page into German", first: "packages/i18n/AGENTS.md" },
  { message: "add the Italian locale and the missing translation strings", first: "packages/i18n/AGENTS.md" },
  { message: "review this for security: we build the SQL query by string concatenation", first: "docs/security/AGENTS.md" },
  { message: "rewrite the getting started guide in the docs, the tone is too casual", first: "docs/AGENTS.md" },
  { message: "the GitHub Actions workflow is slow, can we cache the pnpm store?", first: ".github/AGENTS.md" },
  { message: "useAuthToken returns a stale token after logout", first: "apps/web/src/auth/AGENTS.md" },
  { message: "signing out in one tab leaves the other tabs signed in", first: "apps/web/src/auth/AGENTS.md" },
  { message: "write unit tests for the cart reducer with vitest", first: "packages/testing/AGENTS.md" },
  { message: "testing the checkout with playwright", first: "packages/testing/AGENTS.md" },
  { message: "add an OpenTelemetry span around the checkout handler", first: "services/observability/AGENTS.md" },
  { message: "create a terraform module for the new S3 bucket", first: "infra/AGENTS.md" },
  { message: "deploy the api to production", first: "infra/AGENTS.md" },
  {
    message:
      "Customers are reporting that they get charged twice when the checkout times out and they click " +
      "pay again. I think our charge call doesn't send an idempotency key, can you look into the payments " +
      "service and fix it?",
    first: "services/payments/AGENTS.md",
  },
];

const PYTHON_TRACE = `Traceback (most recent call last):
  File "/home/me/analysis/report.py", line 42, in <module>
    df = summarize(frame)
  File "/home/me/analysis/report.py", line 17, in summarize
    return frame.groupby("region")["revenue"].sum()
  File "/usr/lib/python3.11/site-packages/pandas/core/frame.py", line 3805, in __getitem__
    indexer = self.columns.get_loc(key)
  File "/usr/lib/python3.11/site-packages/pandas/core/indexes/base.py", line 3802, in get_loc
    raise KeyError(key) from err
KeyError: 'revenue'`;

const NODE_TRACE = `Error: connect ECONNREFUSED 127.0.0.1:6379
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1607:16)
    at RedisClient.on_error (/srv/worker/node_modules/redis/index.js:406:14)
    at Socket.<anonymous> (/srv/worker/node_modules/redis/index.js:279:14)
    at Socket.emit (node:events:519:28)
    at emitErrorNT (node:internal/streams/destroy:169:8)`;

/** Messages about nothing any file covers. */
const UNRELATED: readonly string[] = [
  "",
  "hello",
  "hi! thanks, that works",
  "what time is it",
  "fix the typo in README",
  "the and of to is it",
  "what's the capital of France?",
  "rename the variable x to count",
  "explain how closures work in JavaScript",
  PYTHON_TRACE,
  NODE_TRACE,
  "convert this CSV file to JSON",
  "write a haiku about autumn",
  "why is my laptop fan so loud?",
  "?!... 🙂 👍",
];

/** An agent file as the plugin will hand it over: frontmatter parsed by the project's parser, headings by headingsOf. */
function docOf(key: string, text: string): AgentDoc {
  const { body, frontmatter } = parseFrontmatter(text);
  const description = frontmatter["description"];
  return { key, description: typeof description === "string" ? description : undefined, headings: headingsOf(body), body };
}

const DOCS = FILES.map(({ key, text }) => docOf(key, text));

/** 200 more files on other subjects, sharing the generic words agent files use ("tests", "review", "files"). */
const OTHER_SUBJECTS = [
  "kubernetes helm charts", "graphql schema resolvers", "ios swift app", "android kotlin gradle", "machine learning training",
  "email templates mjml", "pdf rendering", "elasticsearch search index", "feature flags", "accessibility aria",
  "redis caching", "kafka consumers", "cron jobs scheduler", "image resizing", "analytics events",
  "websocket realtime", "rate limiting", "cli commander", "turborepo pipelines", "eslint prettier linting",
];
const MANY_MORE: readonly AgentDoc[] = Array.from({ length: 200 }, (_, i) => {
  const subject = OTHER_SUBJECTS[i % OTHER_SUBJECTS.length]!;
  const body = `# ${subject}\n\n## Conventions\nFollow the ${subject} guide. Keep files small.\n\n## Testing\nWrite tests for every change. Review before merge.\n`;
  return docOf(`other/${i}/AGENTS.md`, `---\ninclude: agent\ndescription: ${subject} conventions (${i})\n---\n${body}`);
});

const keysOf = (ranked: readonly Ranked[]) => ranked.map((entry) => entry.key);

describe("calibration", () => {
  const ranker = new AgentRanker(DOCS);

  test("the fixture is what it claims: 12 files, one without a description", () => {
    expect(DOCS).toHaveLength(12);
    expect(DOCS.filter((doc) => doc.description === undefined).map((doc) => doc.key)).toEqual(["infra/AGENTS.md"]);
    expect(RELATED.length + UNRELATED.length).toBeGreaterThanOrEqual(25);
  });

  test("recall: each related message gets its file first, with the default threshold and top", () => {
    for (const { message, first } of RELATED) {
      const ranked = ranker.rank(message);
      expect({ message, first: ranked[0]?.key }).toEqual({ message, first });
      expect(ranked.length).toBeLessThanOrEqual(DEFAULT_TOP);
    }
  });

  test("precision: no unrelated message attaches anything", () => {
    for (const message of UNRELATED) expect({ message, ranked: ranker.rank(message) }).toEqual({ message, ranked: [] });
  });

  test("the threshold sits in a gap, not on an edge: related ≥ threshold + 0.02, unrelated ≤ threshold − 0.02", () => {
    const related = Math.min(...RELATED.map(({ message, first }) => ranker.rank(message, { threshold: 0, top: Infinity }).find((r) => r.key === first)!.score));
    const unrelated = Math.max(...UNRELATED.map((message) => ranker.rank(message, { threshold: 0, top: 1 })[0]?.score ?? 0));
    expect(related).toBeGreaterThanOrEqual(DEFAULT_THRESHOLD + 0.02);
    expect(unrelated).toBeLessThanOrEqual(DEFAULT_THRESHOLD - 0.02);
  });

  test("the threshold means the same with one file, and among 200 more", () => {
    for (const { message, first } of RELATED) {
      const alone = new AgentRanker(DOCS.filter((doc) => doc.key === first));
      expect({ message, alone: keysOf(alone.rank(message)) }).toEqual({ message, alone: [first] });
      expect({ message, crowd: new AgentRanker([...DOCS, ...MANY_MORE]).rank(message)[0]?.key }).toEqual({ message, crowd: first });
    }
    const crowd = new AgentRanker([...MANY_MORE, ...DOCS]);
    for (const message of UNRELATED) {
      expect({ message, crowd: crowd.rank(message) }).toEqual({ message, crowd: [] });
      for (const doc of DOCS) expect({ message, doc: doc.key, alone: new AgentRanker([doc]).rank(message) }).toEqual({ message, doc: doc.key, alone: [] });
    }
  });

  test("a file without a description ranks on its headings and body", () => {
    expect(keysOf(ranker.rank("how do we deploy to staging?"))).toEqual(["infra/AGENTS.md"]);
    expect(keysOf(ranker.rank("where do application secrets live in SSM?"))[0]).toBe("infra/AGENTS.md");
  });
});

describe("terms", () => {
  const one = (doc: Partial<AgentDoc>) => new AgentRanker([{ key: "k", description: undefined, headings: [], body: "", ...doc }]);
  const score = (ranker: AgentRanker, message: string) => ranker.rank(message, { threshold: 0 })[0]?.score ?? 0;

  test("stemming: testing, tests, tested and test meet", () => {
    const ranker = one({ description: "Writing tests" });
    for (const message of ["testing", "tests", "tested", "test", "Tests!"]) expect({ message, score: score(ranker, message) }).toEqual({ message, score: score(ranker, "test") });
    expect(score(ranker, "test")).toBeGreaterThan(DEFAULT_THRESHOLD);
  });

  test("identifiers: useAuthToken meets auth token, and its other spellings", () => {
    const code = one({ body: "Call `useAuthToken()` for the current token." });
    expect(score(code, "auth token")).toBeGreaterThan(0);
    const prose = one({ description: "The auth token and its refresh" });
    expect(score(prose, "why does useAuthToken return null")).toBeGreaterThan(DEFAULT_THRESHOLD);
    const snake = one({ description: "use_auth_token handling" });
    for (const spelling of ["useAuthToken", "use-auth-token", "USE_AUTH_TOKEN"]) expect(score(snake, spelling)).toBe(score(snake, "use_auth_token"));
    // The whole identifier is a term of its own: it beats a text that merely has its parts.
    const both = new AgentRanker([
      { key: "whole", description: "useAuthToken", headings: [], body: "" },
      { key: "parts", description: "auth and token", headings: [], body: "" },
    ]);
    expect(keysOf(both.rank("useAuthToken", { threshold: 0 }))).toEqual(["whole", "parts"]);
  });

  test("the whole of an identifier no file holds does not count against the files that hold its parts", () => {
    const ranker = one({ description: "refreshing the auth token" });
    expect(score(ranker, "refreshAuthToken")).toBe(score(ranker, "refresh auth token"));
    expect(score(ranker, "refreshAuthToken")).toBeGreaterThan(DEFAULT_THRESHOLD);
  });

  test("acronyms and camel case split where a reader would: HTTPServer, XMLHttpRequest, APIs", () => {
    expect(score(one({ description: "HTTPServer setup" }), "http server")).toBeGreaterThan(DEFAULT_THRESHOLD);
    expect(score(one({ description: "XMLHttpRequest usage" }), "xml request")).toBeGreaterThan(DEFAULT_THRESHOLD);
    expect(score(one({ description: "Public APIs" }), "the public api")).toBe(score(one({ description: "Public API" }), "the public api"));
  });

  test("stopwords, request verbs, numbers and one-letter words are no terms", () => {
    const ranker = one({ description: "the and of to is it add write fix 2024 404 x y z" });
    for (const message of ["the and of to is it", "please add, write and fix", "2024 404", "x y z", "adding writing fixed"]) {
      expect({ message, ranked: ranker.rank(message, { threshold: 0 }) }).toEqual({ message, ranked: [] });
    }
  });

  test("invisible characters, bidi controls and fullwidth letters do not hide a word", () => {
    const ranker = one({ description: "database migrations" });
    const plain = score(ranker, "migrations");
    expect(plain).toBeGreaterThan(DEFAULT_THRESHOLD);
    for (const disguised of ["mi\u200bgra\u200dtions", "\u202emigrations\u202c", "ｍｉｇｒａｔｉｏｎｓ", "MIGRATIONS", "mi\u00adgrations"]) {
      expect({ disguised, score: score(ranker, disguised) }).toEqual({ disguised, score: plain });
    }
  });

  test("unicode: CJK by character pairs, composed and decomposed accents, RTL scripts, emoji", () => {
    const cjk = one({ description: "数据库迁移的编写与回滚", headings: ["データベース移行"] });
    expect(score(cjk, "如何回滚数据库迁移？")).toBeGreaterThan(DEFAULT_THRESHOLD);
    expect(score(cjk, "データベース移行を実行する")).toBeGreaterThan(DEFAULT_THRESHOLD);
    expect(score(cjk, "今天天气很好")).toBe(0);
    const accents = one({ description: "Traduction des chaînes et café" });
    expect(score(accents, "chai\u0302nes cafe\u0301")).toBe(score(accents, "chaînes café"));
    expect(score(accents, "chaînes café")).toBeGreaterThan(DEFAULT_THRESHOLD);
    const rtl = one({ description: "ترجمة الواجهة", headings: ["תרגום ממשק"] });
    expect(score(rtl, "ترجمة")).toBeGreaterThan(DEFAULT_THRESHOLD);
    expect(score(rtl, "\u202bתרגום\u202c")).toBeGreaterThan(DEFAULT_THRESHOLD);
    const emoji = one({ description: "🚀 release 🚀", body: "👨‍👩‍👧‍👦".repeat(1000) });
    expect(score(emoji, "🚀🚀🚀 👨‍👩‍👧‍👦")).toBe(0);
    expect(score(emoji, "release 🚀")).toBeGreaterThan(DEFAULT_THRESHOLD);
  });
});

describe("ranking", () => {
  test("sorted by score, ties by key; top and threshold are applied to the recorded (rounded) score", () => {
    const twins = ["b", "a", "c"].map((key) => ({ key, description: "payments refunds", headings: [], body: "" }));
    const ranked = new AgentRanker(twins).rank("refunds", { threshold: 0, top: 2 });
    expect(keysOf(ranked)).toEqual(["a", "b"]);
    expect(ranked[0]!.score).toBe(ranked[1]!.score);
    const { score } = ranked[0]!;
    expect(Math.round(score * 1000) / 1000).toBe(score);
    expect(new AgentRanker(twins).rank("refunds", { threshold: score, top: 9 })).toEqual([]);
    expect(new AgentRanker(twins).rank("refunds", { threshold: score - 0.001, top: 9 })).toHaveLength(3);
  });

  test("odd options fall back or clamp instead of throwing", () => {
    const ranker = new AgentRanker(DOCS);
    const message = "testing the checkout with playwright"; // some evidence in three files
    const defaults = ranker.rank(message);
    expect(defaults.length).toBeGreaterThan(0);
    expect(ranker.rank(message, { threshold: Number.NaN, top: Number.NaN })).toEqual(defaults);
    expect(ranker.rank(message, { threshold: Number.POSITIVE_INFINITY })).toEqual(defaults);
    expect(ranker.rank(message, { top: -1 })).toEqual([]);
    expect(ranker.rank(message, { top: 0 })).toEqual([]);
    expect(ranker.rank(message, { top: 1.9 })).toHaveLength(1);
    // A negative threshold is 0: a file with no evidence never attaches.
    const everything = ranker.rank(message, { threshold: -5, top: Number.POSITIVE_INFINITY });
    expect(everything.length).toBeGreaterThan(1);
    expect(everything).toEqual(ranker.rank(message, { threshold: 0, top: Number.POSITIVE_INFINITY }));
    expect(everything.every(({ score }) => score > 0)).toBe(true);
    expect(ranker.rank(message, { threshold: 1 })).toEqual([]);
    expect(new AgentRanker([]).rank(message)).toEqual([]);
  });

  test("deterministic: the same message ranks the same, whatever the order of the docs or how often", () => {
    const forward = new AgentRanker(DOCS);
    const backward = new AgentRanker([...DOCS].reverse());
    for (const { message } of RELATED) {
      const all = { threshold: 0, top: Number.POSITIVE_INFINITY };
      expect(backward.rank(message, all)).toEqual(forward.rank(message, all));
      expect(forward.rank(message, all)).toEqual(forward.rank(message, all));
    }
  });

  test("a file's scores depend on the others only through idf: a changed file leaves the order of the rest", () => {
    const before = new AgentRanker(DOCS).rank("refund the charge when stripe sends a dispute webhook", { threshold: 0, top: 3 });
    const edited = DOCS.map((doc) => (doc.key === "docs/AGENTS.md" ? { ...doc, body: `${doc.body}\nMore about tone.` } : doc));
    const after = new AgentRanker(edited).rank("refund the charge when stripe sends a dispute webhook", { threshold: 0, top: 3 });
    expect(after).toEqual(before);
  });
});

describe("headingsOf", () => {
  test("ATX headings outside ``` and ~~~ fences, markers removed", () => {
    const markdown = [
      "# Title", "text", "## Second ##", "###\tTabbed", "#hashtag is not a heading", "####### seven is not one", "   # indented is not one",
      "```md", "# inside a fence", "```", "~~~~", "## inside tildes", "```", "## still inside: a backtick run does not close tildes", "~~~~",
      "###### Six", "## C# and F# ##", "## #", "##", "Setext is not ATX", "===",
    ].join("\n");
    // `##` alone is no heading to the block's cut rules (doc.ts wants a blank after the run), so none here either.
    expect(headingsOf(markdown)).toEqual(["Title", "Second", "Tabbed", "Six", "C# and F#", ""]);
  });

  test("CRLF, an unclosed fence, nothing at all", () => {
    expect(headingsOf("# One\r\nx\r\n## Two\r\n")).toEqual(["One", "Two"]);
    expect(headingsOf("# Before\n```\n# after an unclosed fence\n")).toEqual(["Before"]);
    expect(headingsOf("")).toEqual([]);
    expect(headingsOf("\n\n   \n")).toEqual([]);
  });

  test("its text is the model's: tags neutralized, invisible characters removed", () => {
    expect(headingsOf("# Use <system> tags\u200b here")).toEqual(["Use &lt;system> tags here"]);
  });

  test("worst inputs stay linear: 32K headings, a 128 KB heading, 128 KB of hashes", () => {
    const started = performance.now();
    expect(headingsOf("# h\n".repeat(32_768))).toHaveLength(32_768);
    const long = headingsOf(`# ${"word ".repeat(26_000)}\nafter`);
    expect(long).toHaveLength(1);
    expect(long[0]!.length).toBe("word ".repeat(26_000).trimEnd().length);
    expect(headingsOf("#".repeat(131_072))).toEqual([]);
    expect(headingsOf(`## ${"#".repeat(131_072)}`)).toEqual([""]);
    expect(headingsOf("```\n".repeat(65_536))).toEqual([]);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

// ---------------------------------------------------------------------------------------------------
// Properties

const VOCABULARY = [...new Set([...RELATED.map((r) => r.message), ...UNRELATED].flatMap((message) => message.split(/\s+/)))];
const HOSTILE = [
  "", " ", "\u0000", "\ud800", "\udfff", "\u200b", "\u202e", "🙂", "👨‍👩‍👧‍👦", "e\u0301", "ﬁ", "ｍｉｇｒａｔｉｏｎ", "数据库迁移", "ترجمة",
  "_", "-", "__proto__", "constructor", "hasOwnProperty", "toString", "a".repeat(49), "x".repeat(5000), "aB".repeat(300), "a_".repeat(300),
];
const word = fc.oneof(fc.constantFrom(...VOCABULARY), fc.constantFrom(...HOSTILE), fc.string({ maxLength: 12 }), fc.string({ unit: "binary", maxLength: 12 }));
const text = fc.array(word, { maxLength: 40 }).map((words) => words.join(" "));
const message = fc.oneof(text, fc.string({ unit: "grapheme", maxLength: 200 }), fc.string({ unit: "binary", maxLength: 200 }));
const agentDoc = fc.record({
  key: fc.string({ maxLength: 8 }),
  description: fc.option(text, { nil: undefined }),
  headings: fc.array(text, { maxLength: 4 }),
  body: text,
});
const corpus = fc.oneof(fc.constant(DOCS), fc.array(agentDoc, { maxLength: 8 }));
/** Words of the calibration messages only: most rank something in DOCS (random text rarely does). */
const relevant = fc.array(fc.constantFrom(...VOCABULARY), { minLength: 3, maxLength: 20 }).map((words) => words.join(" "));
const anyMessage = fc.oneof(message, relevant, relevant);
/** Runs whose assertions had something to hold (found in review: most ranked nothing, so checked nothing). */
const checked = { runs: 0, useful: 0 };
const expectUseful = (share: number) => {
  expect(checked.useful).toBeGreaterThanOrEqual(share * checked.runs);
  checked.runs = checked.useful = 0;
};
const options = fc.record({ threshold: fc.oneof(fc.double(), fc.double({ min: 0, max: 1, noNaN: true })), top: fc.oneof(fc.integer({ min: -2, max: 20 }), fc.double()) }, { requiredKeys: [] });

describe("properties", () => {
  test("never throws; scores in [0, 1] with 3 decimals; sorted, ties by key; at most top", () => {
    fc.assert(
      fc.property(corpus, anyMessage, options, (docs, text, opts) => {
        const ranked = new AgentRanker(docs).rank(text, opts);
        checked.runs++;
        if (ranked.length >= 2) checked.useful++;
        const top = opts.top === undefined || Number.isNaN(opts.top) ? DEFAULT_TOP : Math.max(0, Math.floor(opts.top));
        expect(ranked.length).toBeLessThanOrEqual(top);
        ranked.forEach(({ score }, i) => {
          expect(score).toBeGreaterThanOrEqual(0);
          expect(score).toBeLessThanOrEqual(1);
          expect(Math.round(score * 1000) / 1000).toBe(score);
          const next = ranked[i + 1];
          if (next !== undefined) expect(score > next.score || (score === next.score && ranked[i]!.key <= next.key)).toBe(true);
        });
      }),
      { numRuns: 400 },
    );
    expectUseful(0.05);
  });

  test("monotone in the threshold: a higher one keeps a prefix of what a lower one keeps", () => {
    fc.assert(
      fc.property(corpus, anyMessage, fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(5), (docs, text, a, b, top) => {
        const ranker = new AgentRanker(docs);
        const low = ranker.rank(text, { threshold: Math.min(a, b), top });
        const high = ranker.rank(text, { threshold: Math.max(a, b), top });
        checked.runs++;
        if (low.length > 0) checked.useful++;
        expect(low.slice(0, high.length)).toEqual(high);
        for (const { score } of high) expect(score).toBeGreaterThan(Math.max(a, b));
      }),
      { numRuns: 300 },
    );
    expectUseful(0.05);
  });

  test("more room never drops a file: top n is a prefix of top n + k", () => {
    fc.assert(
      fc.property(corpus, anyMessage, fc.nat(6), fc.nat(6), (docs, text, n, k) => {
        const ranker = new AgentRanker(docs);
        const more = ranker.rank(text, { threshold: 0, top: n + k });
        expect(more.slice(0, n)).toEqual(ranker.rank(text, { threshold: 0, top: n }));
        checked.runs++;
        if (n > 0 && more.length > n) checked.useful++;
      }),
      { numRuns: 200 },
    );
    expectUseful(0.05);
  });

  test("case and invisible characters of a one-case ASCII message do not matter", () => {
    const ranker = new AgentRanker(DOCS);
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...VOCABULARY.map((w) => w.toLowerCase()).filter((w) => /^[\x00-\x7f]*$/.test(w))), { maxLength: 20 }), (words) => {
        const lower = words.join(" ");
        const all = { threshold: 0, top: Number.POSITIVE_INFINITY };
        expect(ranker.rank(lower.toUpperCase(), all)).toEqual(ranker.rank(lower, all));
        expect(ranker.rank(words.join(" \u200b"), all)).toEqual(ranker.rank(lower, all));
      }),
      { numRuns: 200 },
    );
  });

  test("a file's own description, as a message, ranks it above the threshold (when it says something)", () => {
    const ranker = new AgentRanker(DOCS);
    for (const doc of DOCS) if (doc.description !== undefined) expect(ranker.rank(doc.description)[0]?.key).toBe(doc.key);
  });
});

// ---------------------------------------------------------------------------------------------------
// Worst cases

/** ~128 KB of agent-file prose: the fixture's bodies repeated. */
const BIG_BODY = DOCS.map((doc) => doc.body).join("\n").repeat(24).slice(0, 131_072);

describe("worst cases", () => {
  test("a 1 MB message: bounded work, still ranked by its opening", () => {
    const ranker = new AgentRanker(DOCS);
    const log = `prisma migrate deploy fails on staging with a drift error\n${"at Object.<anonymous> (/srv/app/index.js:1:1) ".repeat(22_000)}`;
    expect(log.length).toBeGreaterThan(1_000_000);
    const started = performance.now();
    const ranked = ranker.rank(log, { threshold: 0 });
    expect(performance.now() - started).toBeLessThan(200);
    expect(ranked[0]?.key).toBe("packages/db/AGENTS.md");
    expect(ranker.rank("x".repeat(1_048_576))).toEqual([]);
    expect(ranker.rank("migration ".repeat(104_858))[0]?.key).toBe("packages/db/AGENTS.md");
    expect(ranker.rank("aB_".repeat(350_000))).toEqual([]);
  });

  test("an index keeps no other file's text alive (Bun's slices share their string's characters)", () => {
    // Files indexed together share word analyses; a term must not be a slice of another file's text.
    const kept: AgentDoc[] = [];
    Bun.gc(true);
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 40; i++) {
      const big: AgentDoc = { key: "big", description: undefined, headings: [], body: Buffer.alloc(8 << 20, "xylophonequantumzebra ").toString("latin1") };
      const small: AgentDoc = { key: `small${i}`, description: "xylophonequantumzebra", headings: [], body: "" };
      expect(keysOf(new AgentRanker([big, small]).rank("xylophonequantumzebra", { threshold: 0 })).sort()).toEqual(["big", `small${i}`]);
      kept.push(small);
    }
    Bun.gc(true);
    expect(process.memoryUsage().rss - before).toBeLessThan(100 << 20); // 40 bodies of 8 MB would be 320 MB
    expect(new AgentRanker(kept).rank("xylophonequantumzebra", { threshold: 0, top: 1 })).toHaveLength(1);
  });

  test("a 128 KB doc of one repeated word, of one 128 KB word, of camelCase and snake_case runs", () => {
    const docs: AgentDoc[] = [
      { key: "repeated", description: undefined, headings: [], body: "migration ".repeat(13_108) },
      { key: "one-word", description: "z".repeat(131_072), headings: ["y".repeat(131_072)], body: "w".repeat(131_072) },
      { key: "camel", description: undefined, headings: [], body: "xBc".repeat(43_691) },
      { key: "snake", description: undefined, headings: [], body: "ab_".repeat(43_691) },
    ];
    const started = performance.now();
    const ranker = new AgentRanker(docs);
    const ranked = ranker.rank("migration", { threshold: 0 });
    expect(performance.now() - started).toBeLessThan(500);
    expect(keysOf(ranked)).toEqual(["repeated"]);
    expect(ranked[0]!.score).toBeLessThan(1);
    expect(ranker.rank("z".repeat(131_072), { threshold: 0 })).toEqual([]);
    expect(keysOf(ranker.rank("bcx", { threshold: 0 }))).toEqual(["camel"]); // xBcxBcx… is x, Bcx, Bcx, …
    expect(keysOf(ranker.rank("ab", { threshold: 0 }))).toEqual(["snake"]);
  });

  test("5,000 files of 128 KB: indexed in well under a second per 1,000, rebuilt from cache almost free, ranked in milliseconds", () => {
    const headings = headingsOf(BIG_BODY).slice(0, 40);
    const docs: AgentDoc[] = Array.from({ length: 5_000 }, (_, i) => ({
      key: `pkg${i}/AGENTS.md`,
      description: `${OTHER_SUBJECTS[i % OTHER_SUBJECTS.length]} conventions for package ${i}`,
      headings,
      body: BIG_BODY,
    }));
    Bun.gc(true); // the garbage of earlier tests is not this test's cost
    let started = performance.now();
    const ranker = new AgentRanker(docs);
    const indexing = performance.now() - started;
    // About 150 ms per 1,000 on a loaded 2-core machine; the bound is for regressions, not a benchmark.
    expect(indexing).toBeLessThan(5 * 600);

    started = performance.now();
    const rebuilt = new AgentRanker([...docs.slice(1), { ...docs[0]!, body: `${BIG_BODY} changed` }]);
    expect(performance.now() - started).toBeLessThan(Math.max(50, indexing / 20));

    // The bodies are all alike, so only the descriptions tell the files apart.
    started = performance.now();
    const ranked = rebuilt.rank("kafka consumers", { top: 3 });
    expect(performance.now() - started).toBeLessThan(250);
    expect(ranked).toHaveLength(3);
    for (const { key } of ranked) expect(OTHER_SUBJECTS[Number(/\d+/.exec(key)![0]) % OTHER_SUBJECTS.length]).toBe("kafka consumers");
    expect(rebuilt.rank("How do I cut a new release and publish the packages to npm?")).toEqual([]);

    const typical = new AgentRanker(docs.slice(0, 200));
    const times = RELATED.map(({ message }) => {
      const start = performance.now();
      typical.rank(message);
      return performance.now() - start;
    }).sort((a, b) => a - b);
    expect(times[Math.floor(times.length / 2)]!).toBeLessThan(5);
  }, 30_000);
});
