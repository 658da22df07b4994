// The TUI module in the real `opencode` TUI, in a real terminal (tmux, 160x50), with the server
// plugin loaded from opencode.json and the TUI module from tui.json, both from this checkout. A
// prompt typed into the TUI makes the agent touch packages/api; the sidebar must then show that
// directory's AGENTS.md with the tokens the plugin's record gives it. `/context` pins the file: the
// steering request is in the records directory at once, the sidebar and the dialog mark it pending,
// and after the next step the plugin's record lists the pin and the mark turns to pinned.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseSteer, readRecords, steerPath, type RequestRecord } from "../../plugin/records/format.ts";
import { formatTokens } from "../../plugin/tui/view.ts";
import { openScenario, type Scenario } from "./harness.ts";
import { API } from "./monorepo.ts";
import { openTerminal, type Terminal } from "./terminal.ts";

const TUI_ENTRY = resolve(import.meta.dir, "../../plugin/tui/index.ts");
const TOUCH = { tool: "bash", args: { command: "ls", workdir: "packages/api/src/handlers", description: "List handlers" } };
const WAIT_MS = 60_000;

let scenario: Scenario;
let terminal: Terminal | undefined;
let recordsDir = "";

beforeAll(() => {
  scenario = openScenario({ plugin: { via: "config" } });
  writeFileSync(join(scenario.project.dir, "tui.json"), JSON.stringify({ plugin: [[`file://${TUI_ENTRY}`, {}]] }));
  // The default records directory of both modules: $XDG_STATE_HOME/opencode-project-context.
  recordsDir = join(dirname(scenario.project.dir), "home/.local/state/opencode-project-context");
  scenario.server.play([{ toolCalls: [TOUCH] }, { text: "Looked at the handlers." }, { text: "Pinned." }]);
  terminal = openTerminal(scenario.project.dir);
});

afterAll(async () => {
  terminal?.close();
  await scenario.close();
});

/** The one session with records, once it has one that satisfies `found`. */
async function waitForRecord(found: (record: RequestRecord) => boolean, what: string): Promise<RequestRecord> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const sessions = existsSync(recordsDir) ? readdirSync(recordsDir).filter((name) => /^[\w-]+\.jsonl$/.test(name)) : [];
    const latest = sessions.length === 1 ? readRecords(recordsDir, sessions[0]!.replace(/\.jsonl$/, "")).at(-1) : undefined;
    if (latest !== undefined && found(latest)) return latest;
    if (Date.now() > deadline) throw new Error(`no record within ${WAIT_MS} ms: ${what}\nlatest: ${JSON.stringify(latest)}\n--- screen\n${terminal?.screen()}`);
    await new Promise((resolvePoll) => setTimeout(resolvePoll, 100));
  }
}

const apiFile = (record: RequestRecord) => record.files.find((file) => file.path === API.path);
/** A sidebar row: the path, then its tokens at the end of the screen line (the sidebar is the rightmost column). */
const sidebarRow = (screen: string, mark: string, tokens: string) =>
  screen.split("\n").some((line) => new RegExp(`${mark} ${API.path.replaceAll(".", "\\.")}\\s+${tokens.replaceAll(".", "\\.")}\\s*$`).test(line));

test("the sidebar shows the nested AGENTS.md the agent reached, with its tokens from the plugin's record", async () => {
  const screen = terminal!;
  await screen.waitFor((shown) => shown.includes("Ask anything"), "the prompt");
  screen.type("look at the api handlers");
  screen.press("Enter");
  const record = await waitForRecord((latest) => apiFile(latest)?.state === "conversation", `${API.path} in the conversation`);
  const tokens = formatTokens(apiFile(record)!.tokens);
  expect(apiFile(record)!.tokens).toBeGreaterThan(0);
  const shown = await screen.waitFor((text) => sidebarRow(text, " ", tokens), `sidebar row "${API.path} ${tokens}"`);
  expect(shown).toContain("Project context");
}, 2 * WAIT_MS);

test("/context pins the file: a steering request, a pending mark, then the next record's pin", async () => {
  const screen = terminal!;
  const session = readdirSync(recordsDir).find((name) => /^[\w-]+\.jsonl$/.test(name))!.replace(/\.jsonl$/, "");
  const tokens = formatTokens(apiFile(readRecords(recordsDir, session).at(-1)!)!.tokens);
  await screen.waitFor((shown) => shown.includes("Looked at the handlers."), "the first answer");

  screen.type("/context");
  // Enter runs the command the slash menu offers, so it waits for the menu.
  await screen.waitFor((shown) => /\/context\s+Context files of this session/.test(shown), "the slash menu offering /context");
  screen.press("Enter");
  await screen.waitFor((shown) => shown.includes("select to pin or unpin"), "the /context dialog");
  screen.type("packages/api");
  await screen.waitFor((shown) => shown.split("\n").some((line) => line.includes(API.path) && line.includes("conversation")), "the filtered option");
  screen.press("Enter");

  // The marks come from the steering file, so once they show, the request is on disk.
  await screen.waitFor((shown) => shown.includes("pin pending") && sidebarRow(shown, "◇", tokens), "the pending marks in the dialog and the sidebar");
  const steers = parseSteer(readFileSync(steerPath(recordsDir, session), "utf8"));
  expect(steers.map(({ action, path }) => ({ action, path }))).toEqual([{ action: "load", path: API.path }]);

  screen.press("Escape");
  await screen.waitFor((shown) => !shown.includes("select to pin or unpin"), "the dialog closed");
  screen.type("pin it");
  screen.press("Enter");
  const pinned = await waitForRecord((latest) => latest.pins.includes(API.path), `${API.path} pinned`);
  const after = formatTokens(apiFile(pinned)!.tokens);
  await screen.waitFor((shown) => sidebarRow(shown, "◆", after), "the pinned mark in the sidebar");
}, 3 * WAIT_MS);
