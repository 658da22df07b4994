import { writeFileSync } from "node:fs";

/**
 * Collects the numbers behind the README's reliability section (inputs tried, faults injected, what
 * was lost, timings). Kept in memory; written as one JSON file only when `$HARDENING_FIGURES` names
 * one, so a plain `npm test` leaves nothing behind outside the checkout. Each test file runs in the
 * same process, so the file gathers every file's figures; it is rewritten on each record.
 */
export const FIGURES_FILE = process.env.HARDENING_FIGURES;

const all: Record<string, unknown> = {};

export const figures = {
  record(name: string, values: Record<string, unknown>): void {
    all[name] = { ...values, at: new Date().toISOString() };
    if (FIGURES_FILE !== undefined && FIGURES_FILE !== "") writeFileSync(FIGURES_FILE, `${JSON.stringify(all, null, 2)}\n`);
  },
  /** Everything recorded so far in this process. */
  all(): Readonly<Record<string, unknown>> {
    return all;
  },
};
