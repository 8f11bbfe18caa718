/** The building blocks a chapter switches on. */
export type Capability =
  | "loop"
  | "powershell"
  | "tool_registry"
  | "files"
  | "policy"
  | "hooks"
  | "todo"
  | "subagent"
  | "skills"
  | "artifacts"
  | "compaction"
  | "memory";

/** A read-only set of capabilities: no `add` or `delete` reaches callers, not even at runtime. */
export class CapabilitySet implements ReadonlySet<Capability> {
  readonly #items: Set<Capability>;

  constructor(items: Iterable<Capability>) {
    this.#items = new Set(items);
    Object.freeze(this);
  }

  get size(): number {
    return this.#items.size;
  }
  has(value: Capability): boolean {
    return this.#items.has(value);
  }
  forEach(callback: (value: Capability, key: Capability, set: ReadonlySet<Capability>) => void): void {
    this.#items.forEach((value) => callback(value, value, this));
  }
  entries(): SetIterator<[Capability, Capability]> {
    return this.#items.entries();
  }
  keys(): SetIterator<Capability> {
    return this.#items.keys();
  }
  values(): SetIterator<Capability> {
    return this.#items.values();
  }
  [Symbol.iterator](): SetIterator<Capability> {
    return this.#items.values();
  }
}

export interface ChapterProfile {
  readonly chapter: number;
  readonly capabilities: CapabilitySet;
}

/** Chapter 1: the loop and one tool, PowerShell. */
export const P01: ChapterProfile = Object.freeze({
  chapter: 1,
  capabilities: new CapabilitySet(["loop", "powershell"]),
});

/** Chapter 2: a tool registry and the file tools, inside the workspace. */
export const P02: ChapterProfile = Object.freeze({
  chapter: 2,
  capabilities: new CapabilitySet(["loop", "powershell", "tool_registry", "files"]),
});

/** Chapter 3: a permission policy decides every call before it runs. */
export const P03: ChapterProfile = Object.freeze({
  chapter: 3,
  capabilities: new CapabilitySet(["loop", "powershell", "tool_registry", "files", "policy"]),
});

/** Chapter 4: hooks at four fixed points of the loop, around chapter 3's unchanged policy. */
export const P04: ChapterProfile = Object.freeze({
  chapter: 4,
  capabilities: new CapabilitySet(["loop", "powershell", "tool_registry", "files", "policy", "hooks"]),
});

/** Chapter 5: a session TODO list the model replaces whole, and a one-request reminder when it goes stale. */
export const P05: ChapterProfile = Object.freeze({
  chapter: 5,
  capabilities: new CapabilitySet(["loop", "powershell", "tool_registry", "files", "policy", "hooks", "todo"]),
});

/** Chapter 6: `task` runs a one-shot child agent with a fresh history and the parent's governance. */
export const P06: ChapterProfile = Object.freeze({
  chapter: 6,
  capabilities: new CapabilitySet([
    "loop",
    "powershell",
    "tool_registry",
    "files",
    "policy",
    "hooks",
    "todo",
    "subagent",
  ]),
});

/** Chapter 7: the workspace's Skills, a bounded catalog in the system prompt, bodies loaded with load_skill. */
export const P07: ChapterProfile = Object.freeze({
  chapter: 7,
  capabilities: new CapabilitySet([
    "loop",
    "powershell",
    "tool_registry",
    "files",
    "policy",
    "hooks",
    "todo",
    "subagent",
    "skills",
  ]),
});

/**
 * Chapter 8: no new tool, two runtime capabilities: a reply's large results saved as workspace artifacts, and the
 * request history compacted between model calls.
 */
export const P08: ChapterProfile = Object.freeze({
  chapter: 8,
  capabilities: new CapabilitySet([
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
  ]),
});

/**
 * Chapter 9: P08 plus memory, a store in the workspace's `.memory/` that outlives the run: chosen before the first
 * request, extracted from the canonical history after the answer.
 */
export const P09: ChapterProfile = Object.freeze({
  chapter: 9,
  capabilities: new CapabilitySet([
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
    "memory",
  ]),
});

const PROFILES: readonly ChapterProfile[] = [P01, P02, P03, P04, P05, P06, P07, P08, P09];

export class UnknownChapterError extends Error {
  override readonly name = "UnknownChapterError";
}

/** The one profile object of chapter `n`; `buildAgent` accepts no other. */
export function profileForChapter(n: number): ChapterProfile {
  const profile = PROFILES.find((candidate) => candidate.chapter === n);
  if (profile === undefined) {
    const known = PROFILES.map((candidate) => candidate.chapter).join(", ");
    throw new UnknownChapterError(`Chapter ${n} has not been migrated to this snapshot; it knows chapters ${known}`);
  }
  return profile;
}
