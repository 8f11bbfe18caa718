import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { render } from "../confusables.js";

it("the look-alike table in chapter 1's src/cli/confusables.ts is what scripts/confusables.ts writes", () => {
  const file = join(import.meta.dirname, "../../code/chapters/ch01/src/cli/confusables.ts");
  expect(readFileSync(file, "utf8")).toBe(render());
});
