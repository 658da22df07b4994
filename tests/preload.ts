// Every test run gets its own state directory: the plugin's records (on by default) go to
// $XDG_STATE_HOME, and tests leave nothing outside the checkout and the temp dirs they remove.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const state = mkdtempSync(join(tmpdir(), "opc-test-state-"));
process.env.XDG_STATE_HOME = state;
process.on("exit", () => rmSync(state, { recursive: true, force: true }));
