import { createRequire } from "node:module";
import { nextTurn } from "./turns.ts";

/**
 * Libraries only some paths need, loaded at their first use rather than with the plugin's module
 * (`require` of each package's CommonJS build: synchronous where a first use needs it, on Bun and on
 * the Node versions the package supports, for the `explain` CLI). What every first step needs
 * (lru-cache, ignore, o200k's split pattern) is imported with the plugin: loaded on first use instead,
 * with a preload while a first message waits for git, it cut the import by 5-7 ms, but the loads the
 * wait could not hold landed in the step's tasks: the start-up probe's largest stall went from
 * 10.8-17.5 to 12.5-23.7 ms (8 fresh processes each, alternating), for no clear gain in the step.
 */
const require = createRequire(import.meta.url);

/** A value made at its first use, then kept. */
export function lazy<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

/** node:crypto costs Bun 3-6 ms to load (node's stream modules): only the `explain` CLI on Node hashes with it. */
export const nodeCrypto = lazy(() => require("node:crypto") as typeof import("node:crypto"));

/** node:fs/promises (about 1.3 ms to load, in a start-up that needs none of it): the records' writes and the walk without git. */
export const fsPromises = lazy(() => import("node:fs/promises"));

/** `require` as the module at the end of `chain` (each resolved from the one before) would call it: npm may nest a dependency's dependency there. */
export function requireFrom(...chain: string[]): NodeJS.Require {
  let from = require;
  for (const name of chain) from = createRequire(from.resolve(name));
  return from;
}

/**
 * Runs each of `loads` in an event-loop task of its own, so that none holds the loop long; a failure is logged, and that
 * library loads at its first use instead.
 */
export async function preload(loads: readonly (() => unknown)[], warn: (message: string) => void): Promise<void> {
  for (const load of loads) {
    await nextTurn();
    try {
      load();
    } catch (error) {
      warn(`could not preload a library (it loads on first use): ${String(error)}`);
    }
  }
}
