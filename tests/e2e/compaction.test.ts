// OpenCode's internal agents (title generator, compaction summarizer) get no block; the summarizer
// gets the compacting hook's closest-first copy within its budget instead, and after compaction the
// system block holds the session's whole hierarchy (before it: only what the session had at its start). Compaction is forced with a small model context limit and
// one large reported usage.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { countTokens } from "gpt-tokenizer";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import { systemMessages, textOf, type RecordedRequest } from "./model-server.ts";
import { COMPONENTS, WEB, type ContextFile } from "./monorepo.ts";
import { contextBlock, contextFilePaths, nth, occurrences, placesOf, sectionPaths } from "./requests.ts";

/**
 * With `fileNames` preferring CLAUDE.md, the plugin takes the root CLAUDE.md while OpenCode injects the
 * root AGENTS.md: the block is due from the very first request, so a title request that got it would show.
 */
const ROOT_CLAUDE: ContextFile = { path: "CLAUDE.md", marker: "CTX-ROOT-CLAUDE:" };
/** Makes packages/web/AGENTS.md alone larger than the compaction budget, so the copy must be cut. */
const WEB_PADDING_LINES = 200;
const LAST_WEB_LINE = `- web rule ${WEB_PADDING_LINES}: keep components pure and typed.`;
const COMPACTION_TOKENS = 1000;
const CONTEXT_LIMIT = 20_000;

let scenario: Scenario;
let requests: RecordedRequest[] = [];

beforeAll(async () => {
  scenario = openScenario({ plugin: { via: "config", options: { fileNames: ["CLAUDE.md", "AGENTS.md"] } }, contextLimit: CONTEXT_LIMIT });
  const dir = scenario.project.dir;
  writeFileSync(join(dir, ROOT_CLAUDE.path), `# Root (Claude)\n${ROOT_CLAUDE.marker} prefer small commits.\n`);
  const padding = Array.from({ length: WEB_PADDING_LINES }, (_, line) => `- web rule ${line + 1}: keep components pure and typed.`);
  appendFileSync(join(dir, WEB.path), `${padding.join("\n")}\n`);

  scenario.server.play([
    // Reporting nearly the whole context window after this step makes OpenCode compact next.
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/web/src/components/Button.tsx` } }], promptTokens: CONTEXT_LIMIT - 500 },
    { text: "done" },
  ]);
  const result = await scenario.project.run("compact me");
  assertRunSucceeded(result, scenario.server, "compaction run");
  requests = scenario.server.requests;
}, 120_000);

afterAll(async () => {
  await scenario.close();
});

function only(kind: RecordedRequest["kind"]): RecordedRequest {
  const matching = requests.filter((request) => request.kind === kind);
  if (matching.length !== 1) throw new Error(`expected one ${kind} request, got ${matching.length}`);
  return nth(matching, 0);
}

/** The plugin's copy inside the summarizer's user prompt. */
function compactionCopy(): string {
  const prompt = only("compaction").body.messages.filter((message) => message.role === "user").map((message) => textOf(message.content)).join("\n");
  const start = prompt.indexOf("<project-context>");
  const end = prompt.indexOf("</project-context>", start);
  if (start < 0 || end < 0) throw new Error(`no <project-context> copy in the compaction prompt:\n${prompt.slice(-1500)}`);
  return prompt.slice(start, end + "</project-context>".length);
}

describe("internal requests", () => {
  test("the main agent's requests carry the block from the first request on (options reached the plugin)", () => {
    expect(contextFilePaths(nth(scenario.server.mainRequests(), 0))).toEqual([ROOT_CLAUDE.path]);
  });

  test("the title generator gets no block", () => {
    const title = only("title");
    expect(systemMessages(title.body)).toHaveLength(1);
    expect(occurrences(title, ROOT_CLAUDE.marker)).toBe(0);
  });

  test("the compaction agent gets no block as a system message", () => {
    const compaction = only("compaction");
    expect(systemMessages(compaction.body)).toHaveLength(1);
    expect(contextBlock(compaction)).toBeUndefined();
  });
});

describe("compaction", () => {
  test("the summarizer's prompt carries the copy once, closest file first", () => {
    const compaction = only("compaction");
    expect(occurrences(compaction, "<project-context>")).toBe(1);
    const copy = compactionCopy();
    const components = copy.indexOf(COMPONENTS.marker);
    const web = copy.indexOf(WEB.marker);
    expect(components).toBeGreaterThan(-1);
    expect(web).toBeGreaterThan(components);
  });

  test(`the copy stays within ${COMPACTION_TOKENS} tokens; a cut ends by naming the file and the line to read from`, () => {
    const copy = compactionCopy();
    expect(countTokens(copy)).toBeLessThanOrEqual(COMPACTION_TOKENS);
    expect(copy).not.toContain(LAST_WEB_LINE);
    const note = /\[cut to fit the budget: (\d+) tokens left out; read "packages\/web\/AGENTS\.md" from line (\d+)\]\n<\/context-file>/.exec(copy);
    if (note === null) throw new Error(`no cut note for ${WEB.path} in the copy:\n${copy}`);
    // Line n + 2 of the padded file is "web rule n": the line named is the first one left out.
    const line = Number(note[2]);
    expect(copy).toContain(`- web rule ${line - 3}: keep`);
    expect(copy).not.toContain(`- web rule ${line - 2}: keep`);
    expect(Number(note[1])).toBeGreaterThan(0);
  });

  test("the copy names every file of the session's hierarchy: in a section, or listed by path with its tokens", () => {
    const copy = compactionCopy();
    const sections = sectionPaths(copy);
    expect(sections.slice(0, 2)).toEqual([COMPONENTS.path, WEB.path]);
    if (!sections.includes(ROOT_CLAUDE.path)) expect(copy).toMatch(/\[not included \(budget\): "CLAUDE\.md" \(\d+ tokens\)\]/);
  });

  test("the first request after compaction holds the whole hierarchy in its system block, each file once", () => {
    const compactionIndex = only("compaction").index;
    const before = requests.filter((request) => request.kind === "main" && request.index < compactionIndex);
    const after = requests.filter((request) => request.kind === "main" && request.index > compactionIndex);
    const first = nth(after, 0);
    expect(contextFilePaths(first)).toEqual([ROOT_CLAUDE.path, WEB.path, COMPONENTS.path]);
    const block = contextBlock(first) ?? "";
    expect(block).toContain(LAST_WEB_LINE);
    expect(block).not.toContain("[cut to fit");
    for (const file of [ROOT_CLAUDE, WEB, COMPONENTS]) expect(placesOf(first, file.marker)).toEqual(["system"]);
    // Before it, the block held what the session had at its start, byte-identical.
    for (const request of before) expect(contextBlock(request)).toBe(contextBlock(nth(before, 0)) as string);
    expect(contextFilePaths(nth(before, 0))).toEqual([ROOT_CLAUDE.path]);
    // After it, byte-identical again.
    for (const request of after) expect(contextBlock(request)).toBe(block);
  });
});
