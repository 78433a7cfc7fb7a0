/**
 * Page layout: status line on top; run controls and config on the left; on the right what the run
 * is learning (held-out sentence and charts) and the live delegation tree first, then the curves in
 * folds, kept runs, the rollout table, the frontier, the slow-motion step and the stepper; last, a
 * real language model picked from disk (its own worker).
 */
import { ChartsPanel } from './panels/ChartsPanel';
import { ConfigPanel } from './panels/ConfigPanel';
import { ControlsPanel } from './panels/ControlsPanel';
import { FrontierPanel } from './panels/FrontierPanel';
import { LogPanel } from './panels/LogPanel';
import { ModelPanel } from './panels/ModelPanel';
import { RolloutTable } from './panels/RolloutTable';
import { RunsPanel } from './panels/RunsPanel';
import { SlowMotionPanel } from './panels/SlowMotionPanel';
import { StatusBar } from './panels/StatusBar';
import { StepperPanel } from './panels/StepperPanel';
import { StoryPanel } from './panels/StoryPanel';
import { TreePanel } from './panels/TreePanel';

export function App() {
  return (
    <>
      <StatusBar />
      <main className="app">
        <aside className="side">
          <ControlsPanel />
          <ModelPanel />
          <ConfigPanel />
          <LogPanel />
        </aside>
        <div className="main">
          <div className="top">
            <StoryPanel />
            <TreePanel />
          </div>
          <ChartsPanel />
          <RunsPanel />
          <RolloutTable />
          <FrontierPanel />
          <SlowMotionPanel />
          <StepperPanel />
        </div>
      </main>
    </>
  );
}
