// The record `npm run verify:experiments -- --write` keeps in docs/experiments.json: for each chapter, the commit it
// measured and, per measurement, the edits (by hash), the tests it ran and which of them failed. The guides'
// numbers are held to it (claims.ts); the measurement itself is only as current as the inputs it hashes.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TestInputs } from "../test-plan/plan.js";
import type { FileEdit } from "./guide.js";

export interface FileOutcome {
  readonly tests: number;
  readonly red: number;
}

export interface MeasurementRecord {
  readonly experiment: string;
  readonly step: number;
  /** sha256 of the edits as the guide shows them: a changed edit is a different experiment. */
  readonly edits: string;
  /** sha256 of the unedited inputs of the test files it ran: when they change, the numbers may have too. */
  readonly inputs: string;
  readonly red: number;
  /** Every test file it ran (those whose inputs hold an edited file), with its tests and reds. */
  readonly files: Readonly<Record<string, FileOutcome>>;
  /** The failed tests, as `tests/x.test.ts › describe › test`. */
  readonly failed: readonly string[];
  /** Test files that failed as a whole (a suite that could not load or set up), with vitest's first line. */
  readonly broken: readonly string[];
  readonly seconds: number;
}

export interface ChapterRecord {
  /** The commit whose snapshot was measured (short hash). */
  readonly commit: string;
  readonly date: string;
  /** The chapter gate's number of tests at that commit, unedited (all of them pass there). */
  readonly tests: number;
  readonly measurements: readonly MeasurementRecord[];
}

/** chapter (`ch03`) → its record. */
export type ExperimentRecord = Readonly<Record<string, ChapterRecord>>;

export const RECORD_PATH = "docs/experiments.json";

export function readRecord(repo: string): ExperimentRecord {
  try {
    return JSON.parse(readFileSync(join(repo, RECORD_PATH), "utf8")) as ExperimentRecord;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
}

export function writeRecord(repo: string, record: ExperimentRecord): void {
  const ordered = Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(join(repo, RECORD_PATH), `${JSON.stringify(ordered, null, 2)}\n`);
}

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

export const editsHash = (edits: readonly FileEdit[]): string => sha256(JSON.stringify(edits));

/** The chapter folder (`code/chapters/ch03/`) every edited path must be inside, and the paths relative to it. */
export function snapshotPaths(chapter: string, edits: readonly FileEdit[]): { paths: string[]; outside: string[] } {
  const prefix = `code/chapters/${chapter}/`;
  const paths = edits.map((edit) => edit.path);
  return {
    paths: paths.filter((path) => path.startsWith(prefix)).map((path) => path.slice(prefix.length)),
    outside: paths.filter((path) => !path.startsWith(prefix)),
  };
}

/**
 * The test files an edit of `paths` (snapshot-relative) can change the outcome of: those with one of them among
 * their inputs (scripts/test-plan). Every other test's inputs are the unedited bytes, and those pass in the gate.
 */
export function affectedTests(inputs: ReadonlyMap<string, TestInputs>, paths: readonly string[]): string[] {
  return [...inputs]
    .filter(([, own]) => paths.some((path) => own.files[path] !== undefined))
    .map(([file]) => file)
    .sort();
}

/** The hash of the unedited inputs of `tests`. */
export function inputsHash(inputs: ReadonlyMap<string, TestInputs>, tests: readonly string[]): string {
  return sha256(JSON.stringify(tests.map((file) => [file, inputs.get(file)?.files ?? null])));
}
