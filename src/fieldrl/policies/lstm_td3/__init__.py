"""LSTM-TD3 (Meng, Gorbet & Kulić 2021): TD3 with a memory of recent (observation, action) pairs."""

from fieldrl.policies.lstm_td3.algorithm import LSTMTD3
from fieldrl.policies.lstm_td3.buffer import HistoryReplayBuffer, HistoryReplayBufferSamples
from fieldrl.policies.lstm_td3.history import HistoryWindow
from fieldrl.policies.lstm_td3.policies import LSTMTD3Policy

MlpLstmPolicy = LSTMTD3Policy

__all__ = [
    "LSTMTD3",
    "HistoryReplayBuffer",
    "HistoryReplayBufferSamples",
    "HistoryWindow",
    "LSTMTD3Policy",
    "MlpLstmPolicy",
]
