import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { projects, sectionPaths } from "./helpers/harness.ts";

const open = projects();
const TITLE = "You are a title generator. You output ONLY a thread title. Nothing else.\n\n<task>\nGenerate a brief title\n</task>";
// What a plugin that runs before this one (opencode-anthropic-auth's well-known transform) leaves in system.
const PREFIX = "You are Claude Code, Anthropic's official CLI for Claude.";

async function transform(plugin: Awaited<ReturnType<typeof open>>, sessionID: string, system: unknown[]) {
  const output = { system: [...system] as string[] };
  await plugin.hooks["experimental.chat.system.transform"]!({ sessionID, model: {} as never }, output);
  return output.system.slice(system.length);
}

describe("system arrays of other shapes than OpenCode's own (found in a hunt)", () => {
  test("the title generator's request gets no block when an earlier plugin unshifted a prefix into system", async () => {
    const plugin = await open("monorepo");
    const pushed = await transform(plugin, "ses_title", [PREFIX, `${PREFIX}\n\n${TITLE}`]);
    expect(pushed).toEqual([]);
  });

  test("the title generator's request gets no block when system[0] is not a string", async () => {
    const plugin = await open("monorepo");
    const pushed = await transform(plugin, "ses_title2", [{ type: "text", text: "[note]" }, TITLE]);
    expect(pushed).toEqual([]);
  });

  test("OpenCode's own root AGENTS.md is recognised when the header is not system[0]", async () => {
    const plugin = await open("monorepo");
    const raw = await readFile(join(plugin.root, "AGENTS.md"), "utf8");
    const header = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${raw}`;
    // Control: the header alone, as OpenCode sends it: the root file is the host's, the block leaves it out.
    const alone = await transform(plugin, "ses_a", [header]);
    expect(sectionPaths(alone[0])).not.toContain("AGENTS.md");
    // The same header behind another plugin's prefix: the plugin copies OpenCode's file once more.
    const behind = await transform(plugin, "ses_b", [PREFIX, `${PREFIX}\n\n${header}`]);
    expect(sectionPaths(behind[0])).not.toContain("AGENTS.md");
  });
});

describe("a title request behind another plugin's entries (found in a hunt)", () => {
  test("title request first (system[0] an object another plugin unshifted), then the main step: OpenCode's root AGENTS.md is not copied into the frozen block", async () => {
    const plugin = await open("monorepo");
    const raw = await readFile(join(plugin.root, "AGENTS.md"), "utf8");
    const header = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${raw}`;
    const marker = { type: "text", text: "[note]" };
    // Control: a session whose first request is its main step.
    const control = await transform(plugin, "ses_ctl", [marker, header]);
    expect(sectionPaths(control[0])).not.toContain("AGENTS.md");
    // Title generation runs concurrently with the first main step and may come first.
    await transform(plugin, "ses_main", [marker, TITLE]);
    const main = await transform(plugin, "ses_main", [marker, header]);
    expect(sectionPaths(main[0])).not.toContain("AGENTS.md");
  });
});

describe("an agent prompt that quotes an internal agent's prompt (found in review)", () => {
  test("a main step whose agent prompt quotes the title generator's prompt on a line of its own still gets its block", async () => {
    const plugin = await open("monorepo");
    const header = "You are opencode, an interactive CLI tool.\n\n# Our app\nThe titles service sends this prompt to its model:\nYou are a title generator for support tickets.\n";
    const block = await plugin.step("s", header);
    // Control: the same header without that line gets the root AGENTS.md.
    expect(sectionPaths(await plugin.step("ctl", "You are opencode, an interactive CLI tool.\n"))).toContain("AGENTS.md");
    expect(sectionPaths(block)).toContain("AGENTS.md");
  });
});
