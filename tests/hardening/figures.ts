import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Collects the numbers behind the README's reliability section (inputs tried, faults injected,
 * what was lost) into one JSON file, `$HARDENING_FIGURES` or `<tmp>/pc-hardening-figures.json`.
 */
export const FIGURES_FILE = process.env.HARDENING_FIGURES ?? join(tmpdir(), "pc-hardening-figures.json");

export const figures = {
  record(name: string, values: Record<string, unknown>): void {
    let all: Record<string, unknown> = {};
    try {
      all = JSON.parse(readFileSync(FIGURES_FILE, "utf8")) as Record<string, unknown>;
    } catch {
      // first record
    }
    all[name] = { ...values, at: new Date().toISOString() };
    writeFileSync(FIGURES_FILE, `${JSON.stringify(all, null, 2)}\n`);
  },
};
