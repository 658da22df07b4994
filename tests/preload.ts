// Every test run gets its own state directory: the plugin's records (on by default) go to
// $XDG_STATE_HOME, and tests leave nothing outside the checkout and the temp dirs they remove.
import { afterAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const state = mkdtempSync(join(tmpdir(), "opc-test-state-"));
process.env.XDG_STATE_HOME = state;
// A preload's afterAll runs once, after every file's tests (bun test never emits "exit" to it: one directory was left per run).
afterAll(() => rmSync(state, { recursive: true, force: true }));
