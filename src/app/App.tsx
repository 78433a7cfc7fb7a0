/** Page layout: status line on top; run controls and config on the left; curves, kept runs, rollouts, tree, frontier, the slow-motion step and the stepper on the right. */
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
          <ChartsPanel />
          <RunsPanel />
          <div className="split">
            <RolloutTable />
            <TreePanel />
          </div>
          <FrontierPanel />
          <SlowMotionPanel />
          <StepperPanel />
        </div>
      </main>
    </>
  );
}
