"""cliplint: find gradient-clipping and loss-numerics mistakes in TensorFlow/Keras training code."""

__version__ = "0.1.0"
