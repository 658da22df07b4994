/**
 * The token counter process (forked by tokens.ts): loads gpt-tokenizer's o200k tables here, out of
 * the plugin's process, and answers count requests in order. It exits with its parent's channel.
 */
import { mergeLongPiecesFast } from "./bpe.ts";
import type { CountReply, CountRequest } from "./tokens.ts";

/** Special-token look-alikes in a context file are plain text to the model, so they count as text. */
const PLAIN_TEXT = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

const send = (reply: CountReply) => process.send?.(reply);

// The listener is registered before the tables load (a message with no listener is dropped);
// requests wait for the load and run in arrival order.
const tokenizer = import("gpt-tokenizer/encoding/o200k_base").then((encoding) => {
  // A unit may be one long piece (see units.ts): merged in O(n log n), not gpt-tokenizer's O(n²).
  mergeLongPiecesFast(encoding.default);
  return encoding;
});
tokenizer.catch(() => {}); // reported per request below

process.on("message", async ({ id, units }: CountRequest) => {
  try {
    const { countTokens } = await tokenizer;
    send({ id, counts: units.map((unit) => countTokens(unit, PLAIN_TEXT)) });
  } catch (error) {
    send({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
process.on("disconnect", () => process.exit(0));
