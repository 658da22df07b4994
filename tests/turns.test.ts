import { expect, test } from "bun:test";
import { inSlices } from "../plugin/turns.ts";

/** Holds the thread for `ms` (the work of one item). */
const busy = (ms: number) => {
  for (const until = performance.now() + ms; performance.now() < until; );
};

test("inSlices gives the loop back between slices, also when it starts inside an immediate: a timer queued before runs before it ends", async () => {
  const order: string[] = [];
  await new Promise<void>((done) =>
    setImmediate(() => {
      setTimeout(() => order.push("timer"), 0);
      void inSlices([1, 2, 3, 4, 5, 6, 7, 8], 4, () => busy(2)).then(() => {
        order.push("slices done");
        done();
      });
    }),
  );
  expect(order).toEqual(["timer", "slices done"]);
});

test("inSlices stops at the first item whose work returns false", async () => {
  const seen: number[] = [];
  await inSlices([1, 2, 3, 4], 4, (item) => (seen.push(item), item !== 2));
  expect(seen).toEqual([1, 2]);
});
