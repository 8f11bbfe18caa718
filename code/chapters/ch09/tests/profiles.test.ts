import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildAgent } from "../src/bootstrap.js";
import {
  CapabilitySet,
  P01,
  P02,
  P03,
  P08,
  P09,
  profileForChapter,
  UnknownChapterError,
  type ChapterProfile,
} from "../src/core/profiles.js";
import { CountingApproval, FakeCommandRunner, FakeFileSystem } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";

/** The tool names the model is offered in each request of a two-turn run built from `profile`. */
async function offeredTools(profile: ChapterProfile): Promise<string[][]> {
  const workspace = await realpath(await mkdtemp(join(tmpdir(), "ch03-profiles-")));
  try {
    const model = new ScriptedModel([toolTurn(call("c1", "unknown_tool", {})), textTurn("done")]);
    const agent = buildAgent(profile, {
      model,
      workspace,
      commandRunner: new FakeCommandRunner(),
      fileSystem: new FakeFileSystem(),
      // Chapter 3 cannot be built without both; chapters 1 and 2 ask only about the shell, never called here.
      approvalProvider: new CountingApproval(true),
      auditSink: { record: () => undefined },
    });
    await agent.run("What can you do?");
    return model.requests.map((request) => request.tools.map((tool) => tool.function.name));
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
}

describe("chapter profiles", () => {
  it("P01 is frozen and holds exactly loop and powershell", () => {
    expect(Object.isFrozen(P01)).toBe(true);
    expect([...P01.capabilities]).toEqual(["loop", "powershell"]);
    expect(P01.capabilities.has("policy")).toBe(false);
    expect(profileForChapter(1)).toBe(P01);
  });

  it("P02 is frozen and holds chapter 1's capabilities, then tool_registry and files, and no policy", () => {
    expect(Object.isFrozen(P02)).toBe(true);
    expect(P02.chapter).toBe(2);
    expect([...P02.capabilities]).toEqual(["loop", "powershell", "tool_registry", "files"]);
    expect(P02.capabilities.has("policy")).toBe(false);
    expect(profileForChapter(2)).toBe(P02);
  });

  it("P03 is frozen and holds chapter 2's capabilities, then policy", () => {
    expect(Object.isFrozen(P03)).toBe(true);
    expect(P03.chapter).toBe(3);
    expect([...P03.capabilities]).toEqual(["loop", "powershell", "tool_registry", "files", "policy"]);
    expect(profileForChapter(3)).toBe(P03);
  });

  it("P01 exposes only shell to the model, in every turn", async () => {
    expect(await offeredTools(P01)).toEqual([["shell"], ["shell"]]);
  });

  it("P02 exposes shell, read_file, write_file, edit_file and glob in that fixed order, in every turn", async () => {
    const order = ["shell", "read_file", "write_file", "edit_file", "glob"];
    expect(await offeredTools(P02)).toEqual([order, order]);
  });

  it("P03 adds no tool: the permission policy decides about chapter 2's five, offered in the same order", async () => {
    const order = ["shell", "read_file", "write_file", "edit_file", "glob"];
    expect(await offeredTools(P03)).toEqual([order, order]);
  });

  it("knows no chapter but 1 to 9, and says which it knows", () => {
    expect(() => profileForChapter(10)).toThrow(UnknownChapterError);
    expect(() => profileForChapter(10)).toThrow(
      new UnknownChapterError(
        "Chapter 10 has not been migrated to this snapshot; it knows chapters 1, 2, 3, 4, 5, 6, 7, 8, 9",
      ),
    );
    expect(() => profileForChapter(0)).toThrow(
      new UnknownChapterError(
        "Chapter 0 has not been migrated to this snapshot; it knows chapters 1, 2, 3, 4, 5, 6, 7, 8, 9",
      ),
    );
  });

  it("chapter 8 is the fixed P08: the nine capabilities of P07, then artifacts and compaction", () => {
    expect(profileForChapter(8)).toBe(P08);
    expect(P08.chapter).toBe(8);
    expect([...P08.capabilities]).toEqual([
      "loop",
      "powershell",
      "tool_registry",
      "files",
      "policy",
      "hooks",
      "todo",
      "subagent",
      "skills",
      "artifacts",
      "compaction",
    ]);
  });

  it("chapter 9 is the fixed P09: P08's eleven capabilities, then memory; chapter 10 has not been migrated", () => {
    expect(profileForChapter(9)).toBe(P09);
    expect(Object.isFrozen(P09)).toBe(true);
    expect(P09.chapter).toBe(9);
    expect([...P09.capabilities]).toEqual([...P08.capabilities, "memory"]);
    expect(() => profileForChapter(10)).toThrow(/not been migrated/);
  });

  it("CapabilitySet exposes no mutator, even at runtime", () => {
    const set = new CapabilitySet(["loop"]);
    const loose = set as unknown as Record<string, unknown>;
    expect(loose.add).toBeUndefined();
    expect(loose.delete).toBeUndefined();
    expect(loose.clear).toBeUndefined();
    expect(Object.isFrozen(set)).toBe(true);
    expect(() => {
      loose.add = () => undefined;
    }).toThrow(TypeError);
    expect(set.size).toBe(1);
  });

  it("CapabilitySet behaves as a ReadonlySet", () => {
    const set = new CapabilitySet(["loop", "files", "loop"]);
    const seen: string[] = [];
    set.forEach((value, key, owner) => {
      expect(key).toBe(value);
      expect(owner).toBe(set);
      seen.push(value);
    });
    expect(seen).toEqual(["loop", "files"]);
    expect([...set.keys()]).toEqual([...set.values()]);
    expect([...set.entries()]).toEqual([
      ["loop", "loop"],
      ["files", "files"],
    ]);
  });
});
